package conf_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/conf"
)

type item struct {
	Name   string            `key:"name" doc:"the item's name"`
	Topic  string            `key:"topic" default:"t" doc:"its topic"`
	Window time.Duration     `key:"window,zero" doc:"a window; 0: none"`
	Batch  int               `key:"batch" default:"10" doc:"batch"`
	Rename map[string]string `key:"rename" doc:"renames"`
}

type withList struct {
	Name  string `key:"name" default:"x" doc:"a name"`
	Items []item `key:"items" doc:"the items (a list: in the file only, no variables)"`
}

func (w withList) Validate() error {
	var errs []error
	for i, it := range w.Items {
		if it.Name == "" {
			errs = append(errs, conf.Errorf("Items["+itoa(i)+"].Name", "name: empty"))
		}
		if it.Topic == "bad" {
			errs = append(errs, conf.Errorf("Items["+itoa(i)+"].Topic", "topic: bad"))
		}
	}
	return errors.Join(errs...)
}

func itoa(i int) string { return string(rune('0' + i)) }

func TestListOfSections(t *testing.T) {
	s := conf.New[withList]("P_")
	lists := s.Lists()
	if len(lists) != 1 || lists[0].Path != "items" || len(lists[0].Keys) != 5 || lists[0].Keys[1].Path != "items[].topic" ||
		lists[0].Keys[1].Default != "t" || lists[0].Keys[1].Env != "" {
		t.Fatalf("lists: %+v", lists)
	}
	if _, ok := s.Key("items"); ok {
		t.Error("a list is no key of its own")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	os.WriteFile(path, []byte("items:\n  - name: a\n    rename: {x: y}\n  - name: b\n    topic: u\n    window: 1m\n"), 0o600)
	var v withList
	if _, err := s.Load(&v, path, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	want := []item{{Name: "a", Topic: "t", Batch: 10, Rename: map[string]string{"x": "y"}}, {Name: "b", Topic: "u", Window: time.Minute, Batch: 10}}
	if !reflect.DeepEqual(v.Items, want) {
		t.Errorf("items %+v, want %+v", v.Items, want)
	}

	// Each problem at its item's key path, with its line: unknown keys, bad values, Validate's.
	os.WriteFile(path, []byte("items:\n  - name: a\n    topik: x\n  - topic: bad\n    batch: 0\n  - 3\n"), 0o600)
	_, err := s.Load(&v, path, func(string) string { return "" })
	var es conf.Errors
	if !errors.As(err, &es) {
		t.Fatalf("err %v", err)
	}
	got := err.Error()
	for _, w := range []string{"items[0].topik (line 3): unknown key", "items[1].batch (line 5): 0, want more than 0",
		"items[2] (line 6): want a section", "items[1].topic (line 4): topic: bad", "items[1].name (line 4): name: empty"} {
		if !strings.Contains(got, w) {
			t.Errorf("errors lack %q:\n%s", w, got)
		}
	}
	lines, err := s.Lines(path)
	if err != nil || lines["items[1].topic"] != 4 || lines["items[0]"] != 2 {
		t.Errorf("lines %v %v", lines, err)
	}
}

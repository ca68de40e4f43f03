package envfile

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]string
		wantErr string
	}{
		{name: "stack file", in: "# generated\nBACKFLOW_KAFKA_BROKERS=127.0.0.1:19092,127.0.0.1:19192\n\nBACKFLOW_REDIS_ADDR=127.0.0.1:16379\n",
			want: map[string]string{"BACKFLOW_KAFKA_BROKERS": "127.0.0.1:19092,127.0.0.1:19192", "BACKFLOW_REDIS_ADDR": "127.0.0.1:16379"}},
		{name: "export and quotes", in: "export A=\"x y\"\nB='z'\nC=\"unbalanced\n",
			want: map[string]string{"A": "x y", "B": "z", "C": "\"unbalanced"}},
		{name: "value with equals", in: "URL=http://h/p?a=b\n", want: map[string]string{"URL": "http://h/p?a=b"}},
		{name: "no equals", in: "A=1\njunk\n", wantErr: "line 2"},
		{name: "empty key", in: "=v\n", wantErr: "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestApply: the file's variables reach the environment, but one set there already wins.
func TestApply(t *testing.T) {
	path := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(path, []byte("ENVFILE_TEST_A=from-file\nENVFILE_TEST_B=from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ENVFILE_TEST_B", "from-env")
	t.Setenv("ENVFILE_TEST_A", "")
	os.Unsetenv("ENVFILE_TEST_A")
	if err := Apply(path); err != nil {
		t.Fatal(err)
	}
	if a, b := os.Getenv("ENVFILE_TEST_A"), os.Getenv("ENVFILE_TEST_B"); a != "from-file" || b != "from-env" {
		t.Fatalf("A=%q B=%q, want from-file and from-env", a, b)
	}
	if err := Apply(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing file is not an error")
	}
}

package dashboard

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite "+GrafanaJSONPath+" from Panels")

// TestGrafanaJSONUpToDate: the committed Grafana dashboard is what GrafanaJSON makes of Panels.
// After changing a panel: go test ./internal/dashboard -run TestGrafanaJSONUpToDate -update
func TestGrafanaJSONUpToDate(t *testing.T) {
	want, err := GrafanaJSON()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", GrafanaJSONPath)
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date with Panels: run go test ./internal/dashboard -run TestGrafanaJSONUpToDate -update", GrafanaJSONPath)
	}
	var d struct {
		UID    string
		Panels []struct {
			Type       string
			Title      string
			GridPos    struct{ H, W, X, Y int } `json:"gridPos"`
			Datasource struct{ Type, UID string }
			Targets    []struct {
				RawSQL     string `json:"rawSql"`
				Format     int
				EditorType string `json:"editorType"`
			}
		}
	}
	if err := json.Unmarshal(got, &d); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		n++
		if p.Datasource.Type != GrafanaPluginID || len(p.Targets) != 1 || p.Targets[0].EditorType != "sql" || p.Targets[0].RawSQL == "" {
			t.Errorf("panel %q: datasource %+v, targets %+v", p.Title, p.Datasource, p.Targets)
		}
		if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W == 0 {
			t.Errorf("panel %q overflows the 24-column grid: %+v", p.Title, p.GridPos)
		}
		wantFormat := 1 // table
		if p.Type == "timeseries" {
			wantFormat = 0
		}
		if p.Targets[0].Format != wantFormat {
			t.Errorf("panel %q (%s) has format %d", p.Title, p.Type, p.Targets[0].Format)
		}
	}
	if n != len(Panels) || d.UID != GrafanaDashboardUID {
		t.Fatalf("dashboard %q has %d panels, want %d", d.UID, n, len(Panels))
	}
}

// TestGrafanaProvisioning: the provisioned data source is the one the dashboard refers to, of
// the plugin's type, and the dashboard provider loads the folder the JSON is committed in.
func TestGrafanaProvisioning(t *testing.T) {
	ds, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "provisioning", "datasources", "backflow-clickhouse.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"uid: " + GrafanaDatasourceUID + "\n", "type: " + GrafanaPluginID + "\n", "protocol: native\n"} {
		if !bytes.Contains(ds, []byte(want)) {
			t.Errorf("the data source file lacks %q", want)
		}
	}
	prov, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "provisioning", "dashboards", "backflow.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(prov, []byte("type: file\n")) || filepath.Dir(GrafanaJSONPath) != "deploy/grafana/dashboards" {
		t.Errorf("the dashboard provider must load deploy/grafana/dashboards")
	}
}

// TestGrafanaShowsEventsAheadOfTheClock: the freshness table's event lag has a value mapping
// that shows a negative value as "ahead of the clock", as the page does, and no other column
// of any panel has one.
func TestGrafanaShowsEventsAheadOfTheClock(t *testing.T) {
	b, err := GrafanaJSON()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title       string
			FieldConfig struct {
				Overrides []struct {
					Matcher    struct{ ID, Options string }
					Properties []struct {
						ID    string
						Value []struct {
							Type    string
							Options struct {
								From, To float64
								Result   struct{ Text string }
							}
						}
					}
				}
			} `json:"fieldConfig"`
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var mapped []string
	for _, p := range d.Panels {
		for _, o := range p.FieldConfig.Overrides {
			mapped = append(mapped, p.Title+"/"+o.Matcher.Options)
			if o.Matcher.ID != "byName" || len(o.Properties) != 1 || o.Properties[0].ID != "mappings" || len(o.Properties[0].Value) != 1 {
				t.Fatalf("%s: override %+v, want one value mapping by column name", p.Title, o)
			}
			m := o.Properties[0].Value[0]
			if m.Type != "range" || m.Options.To >= 0 || m.Options.From > -86400*365 || !strings.HasPrefix(m.Options.Result.Text, "ahead of the clock") {
				t.Fatalf("%s/%s: mapping %+v, want every negative value shown as ahead of the clock", p.Title, o.Matcher.Options, m)
			}
		}
	}
	if len(mapped) != 1 || !strings.HasSuffix(mapped[0], "/event_lag_s") {
		t.Fatalf("columns with a mapping: %v, want the freshness table's event_lag_s only", mapped)
	}
}

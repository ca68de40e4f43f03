package layering

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/backflowhq/backflow"

// TestTreeImportsGoOneWay lists every package of the module with `go list` and fails naming
// each import that breaks the rule (test files are not looked at: a test may reach anywhere).
func TestTreeImportsGoOneWay(t *testing.T) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		var own []string
		for _, imp := range p.Imports {
			if r, ok := strings.CutPrefix(imp, module+"/"); ok {
				own = append(own, r)
			}
		}
		imports[rel] = own
	}
	// The tree has every layer: a rule that sees none of them would pass vacuously.
	seen := map[Layer]int{}
	for pkg := range imports {
		seen[LayerOf(pkg)]++
	}
	for l := Leaf; l <= Apart; l++ {
		if seen[l] == 0 {
			t.Errorf("no package in layer %q: is LayerOf out of step with the tree?", l)
		}
	}
	for engine, stages := range Engines {
		for _, p := range append([]string{engine}, stages...) {
			if _, ok := imports[p]; !ok {
				t.Errorf("Engines names %s, which is not a package of the module", p)
			}
		}
	}
	for _, b := range Check(imports) {
		t.Error(b)
	}
}

// TestCheckNamesTheOffendingImport: each kind of upward or sideways import is reported with the
// importing package and the import, and the allowed directions are not.
func TestCheckNamesTheOffendingImport(t *testing.T) {
	for _, tt := range []struct {
		name    string
		imports map[string][]string
		want    []string // substrings of the report, one per line; none: allowed
	}{
		{"leaf imports a stage", map[string][]string{"internal/kafka": {"processors/ingest"}},
			[]string{"internal/kafka (leaf library) imports processors/ingest (stage): a leaf library may not import a stage"}},
		{"stage imports another stage", map[string][]string{"processors/features": {"sinks/redis"}},
			[]string{"processors/features (stage) imports sinks/redis (stage): a stage may not import another stage"}},
		{"a room's part imports the stage above it", map[string][]string{"sinks/clickhouse/chschema": {"sinks/clickhouse"}},
			[]string{"sinks/clickhouse/chschema (stage) imports sinks/clickhouse (stage): a stage may not import another stage"}},
		{"a stage imports another stage's part", map[string][]string{"sinks/redis": {"sinks/clickhouse/chschema"}},
			[]string{"sinks/redis (stage) imports sinks/clickhouse/chschema (stage): a stage may not import another stage"}},
		{"a stage imports a sibling's folder by prefix", map[string][]string{"sinks/click": {"sinks/clickhouse/chschema"}},
			[]string{"sinks/click (stage) imports sinks/clickhouse/chschema (stage): a stage may not import another stage"}},
		{"stage imports the wiring", map[string][]string{"sinks/clickhouse": {"pipelines"}},
			[]string{"sinks/clickhouse (stage) imports pipelines (wiring)"}},
		{"contract imports a stage", map[string][]string{"avro": {"sinks/clickhouse"}},
			[]string{"avro (contract) imports sinks/clickhouse (stage)"}},
		{"product imports a tool", map[string][]string{"cmd/backflow": {"tools/loadgen"}},
			[]string{"cmd/backflow (main) imports tools/loadgen (not the product)"}},
		{"a stage on an engine imports another stage on it", map[string][]string{"sinks/clickhouse/rollups": {"sinks/clickhouse/dlqmirror"}},
			[]string{"sinks/clickhouse/rollups (stage) imports sinks/clickhouse/dlqmirror (stage): a stage may not import another stage"}},
		{"an engine imports a stage that runs on it", map[string][]string{"sinks/clickhouse": {"sinks/clickhouse/rollups"}},
			[]string{"sinks/clickhouse (stage) imports sinks/clickhouse/rollups (stage): an engine never imports a stage that runs on it"}},
		{"the schema engine imports a stage on the loop", map[string][]string{"sinks/clickhouse/chschema": {"sinks/clickhouse/dlqmirror"}},
			[]string{"sinks/clickhouse/chschema (stage) imports sinks/clickhouse/dlqmirror (stage): a stage may not import another stage"}},
		{"allowed directions", map[string][]string{
			"internal/kafka":             {"internal/ops", "internal/secure"},
			"avro":                       {"internal/secure"},
			"sinks/clickhouse":           {"avro", "sinks", "internal/dlq", "sinks/clickhouse/chschema"},
			"sinks/clickhouse/chschema":  {"internal/conf", "internal/rollup"},
			"sinks/clickhouse/rollups":   {"sinks/clickhouse", "internal/rollup"},
			"sinks/clickhouse/dlqmirror": {"sinks/clickhouse", "sinks/clickhouse/chschema", "internal/dlq"},
			"pipelines/replay":           {"processors/ingest", "sinks/clickhouse"},
			"pipelines":                  {"pipelines/replay", "processors/features", "sinks/redis"},
			"cmd/backflow":               {"pipelines", "internal/dlq"},
			"tools/loadgen":              {"avro", "internal/kafka"},
			"test/chaos":                 {"pipelines", "test/faultproxy"},
			"bench/harness":              {"tools/loadgen"},
		}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(tt.imports)
			if len(got) != len(tt.want) {
				t.Fatalf("Check = %q, want %d report(s)", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("report %q does not say %q", got[i], w)
				}
			}
		})
	}
}

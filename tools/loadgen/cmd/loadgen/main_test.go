package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/tools/loadgen"
)

// TestShareFlags: a share flag left out is loadgen's default, one given 0 is none (also after
// the defaults are applied, as often as Run applies them), one given a fraction is that
// fraction, and a negative one is refused by name.
func TestShareFlags(t *testing.T) {
	type shares struct{ sensitive, dup, cross, poison, v2, embedding float64 }
	for _, c := range []struct {
		args    []string
		want    shares
		wantErr string
	}{
		{args: nil, want: shares{0.05, 0.02, 0.25, 0.01, 0.5, 0.3}},
		{args: []string{"--dup-rate", "0"}, want: shares{0.05, 0, 0.25, 0.01, 0.5, 0.3}},
		{args: []string{"--poison-rate", "0", "--sensitive-share=0", "--cross-partition-share", "0", "--v2-share", "0", "--embedding-share", "0", "--dup-rate", "0"}},
		{args: []string{"--poison-rate", "0.001", "--v2-share", "1"}, want: shares{0.05, 0.02, 0.25, 0.001, 1, 0.3}},
		{args: []string{"--poison-rate", "-1"}, wantErr: "--poison-rate: -1 is negative"},
		{args: []string{"--dup-rate", "-0.5", "--embedding-share", "-1"}, wantErr: "--embedding-share"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var cfg loadgen.Config
			f := pflag.NewFlagSet("loadgen", pflag.ContinueOnError)
			bindShareFlags(f, &cfg)
			if err := f.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			err := applyShareFlags(f, &cfg)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			r := cfg.WithDefaults().WithDefaults()
			if got := (shares{r.SensitiveShare, r.DuplicateRate, r.CrossPartitionShare, r.PoisonRate, r.V2Share, r.EmbeddingShare}); got != c.want {
				t.Fatalf("resolved shares %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestSchemaTypeFromExtension: --stream-schema's extension picks the schema type; another
// extension is refused with the ones it takes.
func TestSchemaTypeFromExtension(t *testing.T) {
	for file, want := range map[string]sr.SchemaType{"a.avsc": sr.TypeAvro, "dir/b.proto": sr.TypeProtobuf,
		"page-view.schema.json": sr.TypeJSON, "c.JSON": sr.TypeJSON} {
		if got, err := schemaType(file); err != nil || got != want {
			t.Errorf("%s: %v (%v), want %v", file, got, err, want)
		}
	}
	for _, file := range []string{"d.avro", "e.yaml", "noext"} {
		if _, err := schemaType(file); err == nil || !strings.Contains(err.Error(), "want .avsc (Avro), .proto (Protobuf), or .json or .schema.json (JSON Schema)") {
			t.Errorf("%s: %v, want the extensions it takes", file, err)
		}
	}
}

// Command loadgen sends realistic traffic to backflow's source topics and writes a manifest of
// what the brokers acknowledged: the oracle the tests, the demo, the fault suite and the
// benchmarks check the pipeline against. It is a tool beside the product, not part of it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/envfile"
	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// errUsage marks errors that are the caller's to fix; they exit 2.
var errUsage = errors.New("usage")

// errFound: the command already reported what happened; exit 1 with nothing more to print.
var errFound = errors.New("interrupted")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop) // a second signal ends the process at once
	cmd := newLoadgenCmd()
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %w", errUsage, err) })
	err := cmd.ExecuteContext(ctx)
	switch {
	case err == nil:
		os.Exit(0)
	case errors.Is(err, errFound):
		os.Exit(1)
	case errors.Is(err, errUsage) || errors.Is(err, pipelines.ErrConfig):
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func newLoadgenCmd() *cobra.Command {
	var (
		envFile      string
		configPath   string
		cfg          loadgen.Config
		manifestPath string
		poisonKinds  string
		wordsFile    string
		createTopics bool
		partitions   int32
		replication  int16
		runID        string
		noProgress   bool
		subjects     string
		stream       string
		streamSchema string
		refPrefix    string
	)
	cmd := &cobra.Command{
		Use:   "loadgen",
		Short: "Send realistic traffic to the source topics and write a manifest of what landed",
		Long: `loadgen writes traffic to model-inference-result and gateway-log as a gateway and models
would: each request yields a gateway REQUEST log, an inference result (schema v1 or v2) and a
gateway RESPONSE log, all keyed by requestId. Models, tenants and users follow a Zipf law; some
texts carry words of the sensitive-word dictionary, some disguised (case, spacing, full-width).
On top come duplicates (the same bytes re-sent, some to another partition) and poison records of
every bad-input class: bad_magic, short, unknown_schema, truncated, garbage, missing_request_id,
absurd_timestamp, oversized.

The manifest (JSON lines: a header, then one line per acknowledged record with its topic,
partition, offset, requestId, kind, and for poison the class the pipeline must assign) is the
oracle tests check the pipeline against. Only records the brokers acknowledged are listed.

Every share and rate flag (--sensitive-share, --dup-rate, --cross-partition-share,
--poison-rate, --v2-share, --embedding-share) takes a fraction in [0, 1]: left out, it is the
default shown; 0 means none (--poison-rate 0 sends no poison at all).

With --stream NAME it sends traffic for the stream of that name declared in --config instead
(docs/streams.md): --requests records of the schema in --stream-schema, registered under the
stream's subject with its schemaType, with random valid values for every field, a unique value
in its dedupe key (also the record's Kafka key and the manifest's requestId), event times one
second apart, and duplicates and poison (bad_magic, short, unknown_schema, truncated, garbage,
oversized, and for JSON Schema rejected: a value its schema rejects). The schema file's
extension says its type: .avsc Avro, .proto Protobuf (records are its first message; its
imports are read from its directory and registered first, each under its import path with
--reference-subject-prefix before it), .json or .schema.json JSON Schema.

Stop with Ctrl-C at any time: records in flight are flushed and the manifest stays exact.`,
		Example: `  loadgen --env-file .stack/env --requests 100000 --manifest /tmp/run.jsonl
  loadgen --duration 5m --rate 2000 --poison-rate 0.001
  loadgen --requests 1000 --poison-kinds bad_magic,unknown_schema --dup-rate 0   # no duplicates
  loadgen --config deploy/streams/streams.yaml --stream agent-task-event --stream-schema deploy/streams/agent-task-event.avsc --requests 5000
  loadgen --config deploy/demo.yaml --stream shop-order --stream-schema deploy/streams/shop-order.proto --requests 5000
  loadgen --config deploy/demo.yaml --stream page-view --stream-schema deploy/streams/page-view.schema.json --requests 5000`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnvFile(envFile); err != nil {
				return err
			}
			if err := applyShareFlags(cmd.Flags(), &cfg); err != nil {
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			kinds, err := loadgen.ParsePoisonKinds(poisonKinds)
			if err != nil {
				return fmt.Errorf("%w: --poison-kinds: %w", errUsage, err)
			}
			if stream == "" {
				cfg.PoisonKinds = kinds // a stream's are its own (streamTraffic)
			}
			if cfg.Subjects, err = avro.ParseSubjectStrategy(subjects); err != nil {
				return fmt.Errorf("%w: --subject-strategy: %w", errUsage, err)
			}
			if wordsFile != "" {
				words, err := loadgen.ReadWords(wordsFile)
				if err != nil {
					return fmt.Errorf("%w: --words-file: %w", errUsage, err)
				}
				cfg.Words = words
			}
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			l, err := pipelines.Load(configPath, os.Getenv)
			if err != nil {
				return fmt.Errorf("%w: configuration: %w", errUsage, err)
			}
			conn := l.Config.Conns
			if runID == "" {
				runID = time.Now().UTC().Format("20060102T150405")
			}
			if err := pipelines.StartUp(cmd.Context(), conn, slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)), pipelines.SystemKafka, pipelines.SystemRegistry); err != nil {
				return err
			}
			reg, err := avro.NewRegistryClient(conn.Registry)
			if err != nil {
				return err
			}
			cl, err := conn.Kafka.NewClient(loadgen.ProducerOpts()...)
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx := cmd.Context()
			if createTopics && stream == "" {
				tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := loadgen.EnsureTopics(tctx, cl, partitions, replication, topicOr(cfg.InferenceTopic, avro.TopicInferenceResult), topicOr(cfg.GatewayTopic, avro.TopicGatewayLog))
				cancel()
				if err != nil {
					return err
				}
			}

			var sc loadgen.StreamConfig
			if stream != "" {
				if sc, err = streamTraffic(l.Config.Streams, stream, streamSchema, refPrefix, cfg, poisonKinds); err != nil {
					return fmt.Errorf("%w: %w", errUsage, err)
				}
				if createTopics {
					tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					err := loadgen.EnsureTopics(tctx, cl, partitions, replication, sc.Topic)
					cancel()
					if err != nil {
						return err
					}
				}
			}
			var manifest io.Writer
			if manifestPath != "" {
				f, err := os.Create(manifestPath)
				if err != nil {
					return fmt.Errorf("%w: --manifest: %w", errUsage, err)
				}
				defer f.Close()
				manifest = f
			}
			bar := newProgressBar(cmd.ErrOrStderr(), cfg.Requests, noProgress)
			opts := loadgen.Options{RunID: runID, Manifest: manifest, Progress: func(n int) { bar.Set(n) }}
			var st loadgen.Stats
			if stream != "" {
				st, err = loadgen.RunStream(ctx, sc, cl, reg, opts)
			} else {
				st, err = loadgen.Run(ctx, cfg, cl, reg, opts)
			}
			bar.Finish()
			fmt.Fprintln(cmd.OutOrStdout(), st)
			if manifestPath != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "manifest: %s (run id %s)\n", manifestPath, runID)
			}
			if errors.Is(err, context.Canceled) {
				fmt.Fprintln(cmd.ErrOrStderr(), "loadgen: interrupted; the manifest lists what was acknowledged")
				return errFound
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&envFile, "env-file", "", "read KEY=VALUE settings from this file (e.g. .stack/env); variables already set in the environment win")
	f.StringVar(&configPath, "config", "", "backflow's YAML config file, for its connection settings (kafka, registry)")
	f.IntVar(&cfg.Requests, "requests", 0, "requests to generate, 3 records each (default 10000 unless --duration is set)")
	f.DurationVar(&cfg.Duration, "duration", 0, "stop after this long (with --requests, whichever comes first)")
	f.Float64Var(&cfg.Rate, "rate", 0, "requests per second (0: flat out)")
	f.DurationVar(&cfg.Backfill, "backfill", 0, "date the first event times this long back, catching up with the clock by the end (fills a dashboard's history; at most 24h)")
	f.StringVar(&cfg.InferenceTopic, "inference-topic", avro.TopicInferenceResult, "topic for inference results")
	f.StringVar(&cfg.GatewayTopic, "gateway-topic", avro.TopicGatewayLog, "topic for gateway logs")
	f.IntVar(&cfg.Models, "models", 12, "number of models")
	f.IntVar(&cfg.Tenants, "tenants", 50, "number of tenants")
	f.IntVar(&cfg.UsersPerTenant, "users-per-tenant", 200, "users in each tenant")
	f.Float64Var(&cfg.ZipfS, "zipf", 1.2, "Zipf exponent of model, tenant and user popularity (> 1)")
	f.StringVar(&wordsFile, "words-file", "", "dictionary to plant words from: one entry per line, first tab-separated column (default: the built-in sample words)")
	bindShareFlags(f, &cfg)
	f.StringVar(&poisonKinds, "poison-kinds", "all", "comma-separated poison kinds to rotate through")
	f.IntVar(&cfg.EmbeddingDim, "embedding-dim", 16, "embedding length")
	f.IntVar(&cfg.MaxRecordBytes, "max-record-bytes", avro.DefaultMaxRecordBytes, "the pipeline's record size limit; oversized poison exceeds it")
	f.Uint64Var(&cfg.Seed, "seed", 1, "random seed: the same seed and run id give the same traffic")
	f.StringVar(&subjects, "subject-strategy", "topic", "registry subject naming: topic (<topic>-value), record (full record name) or topic-record")
	f.StringVar(&runID, "run-id", "", "prefix of every requestId (default: the start time, so runs never collide)")
	f.StringVar(&manifestPath, "manifest", "", "write the manifest to this file")
	f.BoolVar(&createTopics, "create-topics", true, "create missing topics")
	f.Int32Var(&partitions, "partitions", 3, "partitions of topics it creates")
	f.Int16Var(&replication, "replication", 1, "replication factor of topics it creates")
	f.BoolVar(&noProgress, "no-progress", false, "do not draw a progress bar")
	f.StringVar(&stream, "stream", "", "send traffic for the stream of this name declared in --config, instead of the source topics")
	f.StringVar(&streamSchema, "stream-schema", "", "with --stream: the schema file to write its records with: .avsc (Avro), .proto (Protobuf), .json or .schema.json (JSON Schema)")
	f.StringVar(&refPrefix, "reference-subject-prefix", "", "with a .proto --stream-schema: put this before the import path of each import, the subject it is registered under")
	return cmd
}

// streamTraffic is the traffic of the declared stream name, written with the schema in file,
// shaped by the flags that apply to a stream.
func streamTraffic(streams []chschema.StreamConfig, name, file, refPrefix string, cfg loadgen.Config, poisonKinds string) (loadgen.StreamConfig, error) {
	var sc chschema.StreamConfig
	found := false
	for _, s := range streams {
		if s.Name == name {
			sc, found = s.WithDefaults(), true
		}
	}
	if !found {
		return loadgen.StreamConfig{}, fmt.Errorf("--stream: no stream %q is declared in the config's streams", name)
	}
	if file == "" {
		return loadgen.StreamConfig{}, errors.New("--stream needs --stream-schema")
	}
	typ, err := schemaType(file)
	if err != nil {
		return loadgen.StreamConfig{}, err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return loadgen.StreamConfig{}, fmt.Errorf("--stream-schema: %w", err)
	}
	out := loadgen.StreamConfig{Topic: sc.Topic, Subject: sc.Subject, Schema: string(b), SchemaType: typ, Message: sc.Message, KeyField: sc.DedupeKey, TimeField: sc.EventTime,
		ImportPaths: []string{filepath.Dir(file)}, ReferencePrefix: refPrefix,
		Records: cfg.Requests, Rate: cfg.Rate, DuplicateRate: cfg.DuplicateRate, CrossPartitionShare: cfg.CrossPartitionShare,
		PoisonRate: cfg.PoisonRate, SensitiveShare: cfg.SensitiveShare, Words: cfg.Words, MaxRecordBytes: cfg.MaxRecordBytes, Seed: cfg.Seed}
	if poisonKinds != "all" && poisonKinds != "" {
		if out.PoisonKinds, err = loadgen.ParsePoisonKinds(poisonKinds); err != nil {
			return loadgen.StreamConfig{}, fmt.Errorf("--poison-kinds: %w", err)
		}
	}
	return out, out.Validate()
}

// schemaType is the type of the schema in file, by its extension.
func schemaType(file string) (sr.SchemaType, error) {
	switch strings.ToLower(filepath.Ext(file)) {
	case ".avsc":
		return sr.TypeAvro, nil
	case ".proto":
		return sr.TypeProtobuf, nil
	case ".json":
		return sr.TypeJSON, nil
	}
	return 0, fmt.Errorf("--stream-schema %s: the extension %q says no schema type; want .avsc (Avro), .proto (Protobuf), or .json or .schema.json (JSON Schema)", file, filepath.Ext(file))
}

// shareFlag is the flag of one of loadgen.Config's shares and rates.
type shareFlag struct {
	name  string
	p     *float64
	def   float64
	usage string
}

// shareFlags are the flags of cfg's shares and rates, bound to its fields.
func shareFlags(cfg *loadgen.Config) []shareFlag {
	return []shareFlag{
		{"sensitive-share", &cfg.SensitiveShare, loadgen.DefaultSensitiveShare, "share of texts with a dictionary word"},
		{"dup-rate", &cfg.DuplicateRate, loadgen.DefaultDuplicateRate, "share of records re-sent with the same requestId"},
		{"cross-partition-share", &cfg.CrossPartitionShare, loadgen.DefaultCrossPartitionShare, "share of duplicates sent to another partition"},
		{"poison-rate", &cfg.PoisonRate, loadgen.DefaultPoisonRate, "poison records per source record"},
		{"v2-share", &cfg.V2Share, loadgen.DefaultV2Share, "share of inference results written with schema v2"},
		{"embedding-share", &cfg.EmbeddingShare, loadgen.DefaultEmbeddingShare, "share of inference results with an embedding"},
	}
}

// bindShareFlags declares the share and rate flags, each a fraction in [0, 1] where 0 means none.
func bindShareFlags(f *pflag.FlagSet, cfg *loadgen.Config) {
	for _, s := range shareFlags(cfg) {
		f.Float64Var(s.p, s.name, s.def, s.usage+", a fraction in [0, 1] (0: none)")
	}
}

// applyShareFlags gives the share flags their one meaning each: a flag not given takes
// loadgen's default, a flag given 0 means none (loadgen.None in the Config), a negative one is
// refused.
func applyShareFlags(f *pflag.FlagSet, cfg *loadgen.Config) error {
	var errs []error
	for _, s := range shareFlags(cfg) {
		switch {
		case !f.Changed(s.name):
			*s.p = 0 // the Config's default, the same as the flag's
		case *s.p < 0:
			errs = append(errs, fmt.Errorf("--%s: %v is negative; 0 means none", s.name, *s.p))
		case *s.p == 0:
			*s.p = loadgen.None
		}
	}
	return errors.Join(errs...)
}

func topicOr(t, def string) string {
	if t == "" {
		return def
	}
	return t
}

// newProgressBar draws on w: a bar when the total is known, a counter otherwise. It draws
// nothing when disabled or when w is not a terminal (CI logs stay clean).
func newProgressBar(w io.Writer, total int, disabled bool) *progressbar.ProgressBar {
	if f, ok := w.(*os.File); disabled || !ok || !isTerminal(f) {
		w = io.Discard
	}
	max := int64(total)
	if total == 0 {
		max = -1
	}
	return progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("requests"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("req"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// applyEnvFile copies the file's settings into the environment where not already set.
func applyEnvFile(path string) error {
	if path == "" {
		return nil
	}
	if err := envfile.Apply(path); err != nil {
		return fmt.Errorf("%w: --env-file: %w", errUsage, err)
	}
	return nil
}

package pipelines

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/processors/features"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/redis"
)

// ErrConfig is what every configuration error matches (errors.Is): the caller's to fix.
var ErrConfig = errors.New("pipelines: invalid configuration")

// ConfigError is one problem with one key.
type ConfigError struct {
	Path   string // key path, e.g. sink_clickhouse.batch_rows
	Source string // where the bad value came from: "" (the file), an env variable, or a flag
	Line   int    // line in the file, when it came from there
	Msg    string
}

func (e *ConfigError) Error() string {
	where := e.Path
	switch {
	case e.Source != "":
		where += " (" + e.Source + ")"
	case e.Line > 0:
		where += fmt.Sprintf(" (line %d)", e.Line)
	}
	return where + ": " + e.Msg
}

// ConfigErrors is every problem found, in key order. It matches ErrConfig.
type ConfigErrors []*ConfigError

func (es ConfigErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Is makes ConfigErrors match ErrConfig.
func (es ConfigErrors) Is(target error) bool { return target == ErrConfig }

// Override is a value given on the command line for a key.
type Override struct {
	Path   string // key path
	Value  string // as a flag takes it: lists comma-separated
	Source string // e.g. "--batch-rows"
}

// Loaded is a checked configuration.
type Loaded struct {
	// File holds every key's value after the file, environment and overrides.
	File Config
	// Conn is the connection settings, secrets resolved, ready for the packages.
	Conn Conns
	// Sources says where each key's value came from: "default", "file", an env variable or a
	// flag.
	Sources map[string]string
}

// Load reads the configuration: Defaults, then the YAML file at path (none when path is
// ""), then every BACKFLOW_* variable getenv returns (os.Getenv when nil), then overrides. It
// checks everything and returns every problem at once as ConfigErrors, each with its key path.
func Load(path string, getenv func(string) string, overrides ...Override) (Loaded, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	l := Loaded{File: Defaults(), Sources: map[string]string{}}
	var errs ConfigErrors
	leaves := fileLeaves(&l.File)
	for _, lf := range leaves {
		l.Sources[lf.path] = "default"
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return l, ConfigErrors{{Path: "--config", Msg: err.Error()}}
		}
		errs = append(errs, decodeFile(data, &l.File, l.Sources)...)
	}
	for _, lf := range leaves {
		if v := getenv(lf.env); v != "" {
			if err := setString(lf.v, v); err != nil {
				errs = append(errs, &ConfigError{Path: lf.path, Source: lf.env, Msg: err.Error()})
				continue
			}
			l.Sources[lf.path] = lf.env
		}
	}
	for _, o := range overrides {
		lf, ok := leafByPath(leaves, o.Path)
		if !ok {
			errs = append(errs, &ConfigError{Path: o.Path, Source: o.Source, Msg: "no such key"})
			continue
		}
		if err := setString(lf.v, o.Value); err != nil {
			errs = append(errs, &ConfigError{Path: o.Path, Source: o.Source, Msg: err.Error()})
			continue
		}
		l.Sources[o.Path] = o.Source
	}
	secrets, serrs := resolveSecrets(l.File, getenv, l.Sources)
	errs = append(errs, serrs...)
	errs = append(errs, validate(l.File, secrets, getenv, l.Sources, errs)...)
	if len(errs) > 0 {
		order := map[string]int{}
		for i, k := range Keys() {
			order[k] = i + 1
		}
		rank := func(p string) int {
			if n, ok := order[p]; ok {
				return n
			}
			// a section or an unknown key: after the known keys of its section
			best := len(order) + 1
			for k, n := range order {
				if strings.HasPrefix(k, p+".") || strings.HasPrefix(p, strings.SplitN(k, ".", 2)[0]+".") {
					best = min(best, n)
				}
			}
			return best
		}
		slices.SortStableFunc(errs, func(a, b *ConfigError) int { return rank(a.Path) - rank(b.Path) })
		return l, errs
	}
	conn, err := l.File.conn(secrets, getenv)
	if err != nil { // validate saw it already; this is a guard
		return l, ConfigErrors{{Path: "connections", Msg: err.Error()}}
	}
	l.Conn = conn
	return l, nil
}

// leaf is one key: a field of File that is not a section.
type leaf struct {
	path, env, doc string
	secretEnv      string // for a _file key: the variable holding the secret itself
	zeroOK         bool
	v              reflect.Value
}

// fileLeaves lists f's keys in declaration order; the values are f's fields (settable).
func fileLeaves(f *Config) []leaf {
	var out []leaf
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			key := sf.Tag.Get("yaml")
			path := key
			if prefix != "" {
				path = prefix + "." + key
			}
			if sf.Type.Kind() == reflect.Struct && sf.Type != reflect.TypeFor[time.Duration]() {
				walk(v.Field(i), path)
				continue
			}
			out = append(out, leaf{path: path, env: EnvName(path), doc: sf.Tag.Get("doc"), secretEnv: sf.Tag.Get("secret"),
				zeroOK: sf.Tag.Get("zero") == "ok", v: v.Field(i)})
		}
	}
	walk(reflect.ValueOf(f).Elem(), "")
	return out
}

func leafByPath(ls []leaf, path string) (leaf, bool) {
	for _, l := range ls {
		if l.path == path {
			return l, true
		}
	}
	return leaf{}, false
}

// EnvName is the environment variable of a key path: sink_clickhouse.batch_rows is
// BACKFLOW_SINK_CLICKHOUSE_BATCH_ROWS.
func EnvName(path string) string {
	return "BACKFLOW_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(path))
}

// Keys lists every key path of the file, in the order of the config reference.
func Keys() []string {
	var f Config
	var out []string
	for _, l := range fileLeaves(&f) {
		out = append(out, l.path)
	}
	return out
}

var durationType = reflect.TypeFor[time.Duration]()

// setString sets a leaf from its string form (a flag, a variable, a YAML scalar).
func setString(v reflect.Value, s string) error {
	s = strings.TrimSpace(s)
	switch {
	case v.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("want a duration such as 500ms, 10s or 1h30m, got %q", s)
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("want a whole number, got %q", s)
		}
		v.SetInt(int64(n))
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", s)
		}
		v.SetBool(b)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		var list []string
		for _, x := range strings.Split(s, ",") {
			if x = strings.TrimSpace(x); x != "" {
				list = append(list, x)
			}
		}
		v.Set(reflect.ValueOf(list))
	default:
		return fmt.Errorf("unsupported key type %s", v.Type())
	}
	return nil
}

// stringOf is the string form setString takes back.
func stringOf(v reflect.Value) string {
	switch {
	case v.Type() == durationType:
		return time.Duration(v.Int()).String()
	case v.Kind() == reflect.Slice:
		return strings.Join(v.Interface().([]string), ",")
	}
	return fmt.Sprint(v.Interface())
}

// secretKey reports whether a key looks like it holds a secret inline.
func secretKey(key string) bool {
	k := strings.ToLower(key)
	if strings.HasSuffix(k, "_file") {
		return false
	}
	for _, w := range []string{"password", "passwd", "token", "secret", "credential", "api_key", "apikey"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// decodeFile decodes YAML into f key by key, so that every unknown key, inline secret and
// bad value is reported with its path and line, not only the first.
func decodeFile(data []byte, f *Config, sources map[string]string) ConfigErrors {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return ConfigErrors{{Path: "(file)", Msg: strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil // empty file: every default
	}
	var errs ConfigErrors
	decodeMapping(doc.Content[0], reflect.ValueOf(f).Elem(), "", sources, &errs)
	return errs
}

func decodeMapping(n *yaml.Node, v reflect.Value, prefix string, sources map[string]string, errs *ConfigErrors) {
	at := prefix
	if at == "" {
		at = "(top level)"
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if n.Kind != yaml.MappingNode {
		*errs = append(*errs, &ConfigError{Path: at, Line: n.Line, Msg: "want a mapping of keys to values"})
		return
	}
	t := v.Type()
	fields := map[string]int{}
	var names []string
	for i := range t.NumField() {
		k := t.Field(i).Tag.Get("yaml")
		fields[k] = i
		names = append(names, k)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		key := kn.Value
		path := key
		if prefix != "" {
			path = prefix + "." + key
		}
		if seen[key] {
			*errs = append(*errs, &ConfigError{Path: path, Line: kn.Line, Msg: "key given twice"})
			continue
		}
		seen[key] = true
		idx, ok := fields[key]
		if !ok {
			*errs = append(*errs, &ConfigError{Path: path, Line: kn.Line, Msg: unknownKey(t, key, path, names)})
			continue
		}
		sf, fv := t.Field(idx), v.Field(idx)
		if sf.Type.Kind() == reflect.Struct && sf.Type != durationType {
			decodeMapping(vn, fv, path, sources, errs)
			continue
		}
		if err := decodeLeaf(vn, fv); err != nil {
			*errs = append(*errs, &ConfigError{Path: path, Line: vn.Line, Msg: err.Error()})
			continue
		}
		sources[path] = "file"
		sources[linePrefix+path] = strconv.Itoa(vn.Line)
	}
}

func unknownKey(t reflect.Type, key, path string, names []string) string {
	if secretKey(key) {
		for i := range t.NumField() {
			sf := t.Field(i)
			if sf.Tag.Get("yaml") == key+"_file" && sf.Tag.Get("secret") != "" {
				return fmt.Sprintf("secrets are never read from the config file; put it in a file and set %s to its path, or set %s",
					strings.TrimSuffix(path, key)+key+"_file", sf.Tag.Get("secret"))
			}
		}
		return "secrets are never read from the config file; pass it in an environment variable or a file (see the config reference)"
	}
	return fmt.Sprintf("unknown key; keys here: %s", strings.Join(names, ", "))
}

func decodeLeaf(n *yaml.Node, v reflect.Value) error {
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		return nil // key: with no value keeps the default
	case n.Kind == yaml.SequenceNode && v.Kind() == reflect.Slice:
		var list []string
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return errors.New("want a list of strings")
			}
			list = append(list, item.Value)
		}
		v.Set(reflect.ValueOf(list))
		return nil
	case n.Kind == yaml.ScalarNode:
		return setString(v, n.Value)
	}
	return errors.New("want a single value, not a mapping or list")
}

// resolveSecrets reads each secret: its variable wins, else the file its _file key names.
// The result is keyed by the secret's variable name; a secret read from a file also leaves
// the file's path under fromFile(variable), so conn can hand the package the file.
func resolveSecrets(f Config, getenv func(string) string, sources map[string]string) (map[string]string, ConfigErrors) {
	out := map[string]string{}
	var errs ConfigErrors
	for _, l := range fileLeaves(&f) {
		if l.secretEnv == "" {
			continue
		}
		if v := getenv(l.secretEnv); v != "" {
			out[l.secretEnv] = v
			continue
		}
		path := l.v.String()
		if path == "" {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, &ConfigError{Path: l.path, Source: sourceOf(sources, l.path), Line: lineOf(sources, l.path), Msg: fmt.Sprintf("cannot read the secret: %v", err)})
			continue
		}
		s := strings.TrimRight(string(data), "\r\n")
		if s == "" {
			errs = append(errs, &ConfigError{Path: l.path, Source: sourceOf(sources, l.path), Line: lineOf(sources, l.path), Msg: fmt.Sprintf("%s is empty", path)})
			continue
		}
		out[l.secretEnv] = s
		out[fromFile(l.secretEnv)] = path
	}
	return out, errs
}

// fromFile is the key of resolveSecrets' result that holds the file a secret was read from.
func fromFile(secretEnv string) string { return "file:" + secretEnv }

// linePrefix marks the entries of a sources map that hold a key's line in the file.
const linePrefix = "line:"

// lineOf is the line of path in the file, or 0.
func lineOf(sources map[string]string, path string) int {
	n, _ := strconv.Atoi(sources[linePrefix+path])
	return n
}

// sourceOf is the Source of a ConfigError about path: "" for the file and defaults.
func sourceOf(sources map[string]string, path string) string {
	if s := sources[path]; s != "file" && s != "default" && s != "" {
		return s
	}
	return ""
}

// conn builds the connection settings. Keys that FromEnv reads go through it by their
// variable names (so FromEnv stays the one place that parses and checks them, and a variable
// it knows that has no key yet still applies); the rest are set here.
func (f Config) conn(secrets map[string]string, getenv func(string) string) (Conns, error) {
	vals := map[string]string{}
	inline := map[string]string{} // secrets given in their own variable
	for _, l := range fileLeaves(&f) {
		switch {
		case l.secretEnv == "":
			vals[l.env] = stringOf(l.v)
		case secrets[fromFile(l.secretEnv)] != "":
			// A secret from a file reaches the package as the file's path, so packages that
			// re-read it on each new connection (Kafka SASL, Redis) pick up a rotated file.
			vals[l.env] = secrets[fromFile(l.secretEnv)]
		default:
			if v, ok := secrets[l.secretEnv]; ok {
				inline[l.secretEnv] = v
			}
		}
	}
	c, err := FromEnv(func(k string) string {
		if v, ok := inline[k]; ok {
			return v
		}
		if v, ok := vals[k]; ok {
			return v
		}
		return getenv(k)
	})
	c.Kafka.ClientID, c.Kafka.DialTimeout, c.Kafka.TableReplication = f.Kafka.ClientID, f.Kafka.DialTimeout, f.Kafka.TableReplication
	c.Registry.Timeout = f.Registry.Timeout
	c.ClickHouse.DialTimeout = f.ClickHouse.DialTimeout
	c.Redis.DialTimeout = f.Redis.DialTimeout
	c.Moderation.Timeout, c.Moderation.MaxItems = f.Sensitive.Timeout, f.Sensitive.MaxItems
	if err == nil {
		err = c.Validate()
	}
	return c, err
}

// IngestConfig is the ingest section as the stage takes it.
func (f Config) IngestConfig() ingest.Config {
	s := f.Ingest
	return ingest.Config{Group: s.Group, InferenceTopic: s.InferenceTopic, GatewayTopic: s.GatewayTopic, EnrichedTopic: s.EnrichedTopic,
		DLQTopic: s.DLQTopic, ControlTopic: s.ControlTopic, DedupeWindow: s.DedupeWindow, ExpireEvery: s.ExpireEvery,
		BatchSize: s.BatchSize, BatchLinger: s.BatchLinger, MaxInFlight: s.MaxInFlight, Policy: ingest.Policy(s.Policy),
		MaxAttempts: s.MaxAttempts, BackoffMin: s.BackoffMin, BackoffMax: s.BackoffMax, BreakerFailures: s.BreakerFailures,
		BreakerOpen: s.BreakerOpen, Decoder: avro.DecoderConfig{MaxRecordBytes: s.MaxRecordBytes}}
}

// SinkClickHouseConfig is the sink_clickhouse section as the sink takes it.
func (f Config) SinkClickHouseConfig() clickhouse.Config {
	s := f.SinkClickHouse
	return clickhouse.Config{Group: s.Group, Topic: s.Topic, DLQTopic: s.DLQTopic, BatchRows: s.BatchRows,
		BatchInterval: s.BatchInterval, InsertTimeout: s.InsertTimeout, BackoffMin: s.BackoffMin, BackoffMax: s.BackoffMax,
		FromStart: s.FromStart}
}

// MirrorConfig is the DLQ mirror's part of the sink_clickhouse section.
func (f Config) MirrorConfig() clickhouse.MirrorConfig {
	s := f.SinkClickHouse
	return clickhouse.MirrorConfig{Group: s.MirrorDLQGroup, Topic: s.DLQTopic, BatchRows: s.BatchRows, BatchInterval: s.BatchInterval,
		InsertTimeout: s.InsertTimeout, BackoffMin: s.BackoffMin, BackoffMax: s.BackoffMax, FromStart: s.FromStart}
}

// SinkFeaturesConfig is the sink_features section as the sink takes it.
func (f Config) SinkFeaturesConfig() features.Config {
	s := f.SinkFeatures
	return features.Config{Group: s.Group, EnrichedTopic: s.EnrichedTopic, DLQTopic: s.DLQTopic, Project: s.Project,
		RequestTTL: s.RequestTTL, RequestWindow: s.RequestWindow, SweepEvery: s.SweepEvery}
}

// RedisWriterConfig is the sink_features section's Redis batching as the writer takes it.
func (f Config) RedisWriterConfig() redis.Config {
	s := f.SinkFeatures
	return redis.Config{MaxBatch: s.RedisBatch, Linger: s.RedisLinger}
}

// connSections are the sections whose keys make up Config; they are checked together.
var connSections = []string{"kafka", "registry", "clickhouse", "redis", "sensitive"}

// checkGroup is the packages' own Validate over some sections. check-config runs it once per
// key with only that key changed from its default (so an error names its key), then once on
// the whole configuration (for rules between keys), reported at name.
type checkGroup struct {
	name     string
	sections []string
	check    func(f Config, secrets map[string]string, getenv func(string) string) error
}

var checkGroups = []checkGroup{
	{"connections", connSections, func(f Config, secrets map[string]string, getenv func(string) string) error {
		_, err := f.conn(secrets, getenv)
		return err
	}},
	{"ingest", []string{"ingest"}, func(f Config, _ map[string]string, _ func(string) string) error { return f.IngestConfig().Validate() }},
	{"sink_clickhouse", []string{"sink_clickhouse"}, func(f Config, _ map[string]string, _ func(string) string) error {
		return errors.Join(f.SinkClickHouseConfig().Validate(), f.MirrorConfig().Validate())
	}},
	{"sink_features", []string{"sink_features"}, func(f Config, _ map[string]string, _ func(string) string) error {
		return f.SinkFeaturesConfig().Validate()
	}},
}

func groupOf(path string) (checkGroup, bool) {
	section, _, _ := strings.Cut(path, ".")
	for _, g := range checkGroups {
		if slices.Contains(g.sections, section) {
			return g, true
		}
	}
	return checkGroup{}, false
}

// sharesMessage reports whether a and b have an error message in common.
func sharesMessage(a, b []error) bool {
	for _, x := range a {
		for _, y := range b {
			if x.Error() == y.Error() {
				return true
			}
		}
	}
	return false
}

// validate checks f; prior are the errors already found (their keys are not checked again).
func validate(f Config, secrets map[string]string, getenv func(string) string, sources map[string]string, prior ConfigErrors) ConfigErrors {
	var errs ConfigErrors
	bad := map[string]bool{}
	for _, e := range prior {
		bad[e.Path] = true
	}
	defer func() {
		for k := range sources {
			if strings.HasPrefix(k, linePrefix) {
				delete(sources, k)
			}
		}
	}()
	add := func(path, msg string) {
		errs = append(errs, &ConfigError{Path: path, Source: sourceOf(sources, path), Line: lineOf(sources, path), Msg: msg})
		bad[path] = true
	}
	leaves := fileLeaves(&f)
	for _, l := range leaves {
		if bad[l.path] || l.zeroOK {
			continue
		}
		if (l.v.Kind() == reflect.Int || l.v.Type() == durationType) && l.v.Int() <= 0 {
			add(l.path, fmt.Sprintf("%s, want more than 0", stringOf(l.v)))
		}
	}
	if !bad["stages"] {
		if len(f.Stages) == 0 {
			add("stages", "empty; want one or more of "+strings.Join(StageNames(), ", "))
		}
		seen := map[string]bool{}
		for _, s := range f.Stages {
			switch {
			case !slices.Contains(StageNames(), s):
				add("stages", fmt.Sprintf("unknown stage %q; stages: %s", s, strings.Join(StageNames(), ", ")))
			case seen[s]:
				add("stages", fmt.Sprintf("stage %q given twice", s))
			}
			seen[s] = true
		}
	}
	if _, err := ops.NewLogger(io.Discard, f.Log.Format, "info"); err != nil && !bad["log.format"] {
		add("log.format", fmt.Sprintf("%q, want text or json", f.Log.Format))
	}
	if _, err := ops.ParseLevel(f.Log.Level); err != nil && !bad["log.level"] {
		add("log.level", fmt.Sprintf("%q, want debug, info, warn or error", f.Log.Level))
	}
	if a := f.Metrics.Addr; a != "" && a != "off" && !bad["metrics.addr"] {
		if _, port, err := net.SplitHostPort(a); err != nil {
			add("metrics.addr", fmt.Sprintf("%q is not host:port (or off)", a))
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			add("metrics.addr", fmt.Sprintf("%q: port %q is not a number from 0 to 65535", a, port))
		}
	}

	// Each key against the package's rules, so that an error names its key: first each key
	// alone on the defaults (no variables, only its own secret); then each key that failed
	// alone again, on the whole configuration with every failing key put back to its default,
	// which drops what only failed for want of another key (a password without its user).
	noenv := func(string) string { return "" }
	def := Defaults()
	defLeaves := fileLeaves(&def)
	candidates := map[int][]error{}
	for i, l := range leaves {
		g, ok := groupOf(l.path)
		if !ok || bad[l.path] || reflect.DeepEqual(l.v.Interface(), defLeaves[i].v.Interface()) {
			continue
		}
		one := Defaults()
		oneLeaves := fileLeaves(&one)
		oneLeaves[i].v.Set(l.v)
		own := map[string]string{}
		if v, ok := secrets[l.secretEnv]; ok {
			own[l.secretEnv] = v
		}
		if err := g.check(one, own, noenv); err != nil {
			candidates[i] = split(err)
		}
	}
	// whole is f with every key that failed (before or alone) at its default.
	whole := f
	wholeLeaves := fileLeaves(&whole)
	for i, l := range wholeLeaves {
		if _, failed := candidates[i]; failed || bad[l.path] {
			l.v.Set(defLeaves[i].v)
		}
	}
	// Only what the configuration as given gets wrong is reported: keys that each fail alone
	// can be right together (a SASL mechanism and its user).
	fullMsgs := map[string]map[string]bool{}
	for _, g := range checkGroups {
		m := map[string]bool{}
		if err := g.check(f, secrets, getenv); err != nil {
			for _, e := range split(err) {
				m[e.Error()] = true
			}
		}
		fullMsgs[g.name] = m
	}
	seenMsg := map[string]bool{}
	for i, l := range leaves {
		errsAlone, ok := candidates[i]
		if !ok {
			continue
		}
		g, _ := groupOf(l.path)
		// Keys of one section that fail alone but not together (a SASL mechanism and its
		// user) are no error: put back every failing key of the section and look again.
		section, _, _ := strings.Cut(l.path, ".")
		together := whole
		togetherLeaves := fileLeaves(&together)
		for j, lj := range leaves {
			if s, _, _ := strings.Cut(lj.path, "."); s == section && !bad[lj.path] {
				if _, failed := candidates[j]; failed {
					togetherLeaves[j].v.Set(lj.v)
				}
			}
		}
		if err := g.check(together, secrets, noenv); err == nil || !sharesMessage(split(err), errsAlone) {
			continue
		}
		again := whole
		againLeaves := fileLeaves(&again)
		againLeaves[i].v.Set(l.v)
		err := g.check(again, secrets, noenv)
		if err == nil {
			continue
		}
		msgs := map[string]bool{}
		for _, e := range split(err) {
			msgs[e.Error()] = true
		}
		for _, e := range errsAlone {
			if msgs[e.Error()] && fullMsgs[g.name][e.Error()] && !seenMsg[e.Error()] {
				add(l.path, e.Error())
				seenMsg[e.Error()] = true
			}
		}
	}
	// The configuration as given, with the keys already reported at their defaults (so their
	// errors are not repeated and do not hide the rest): rules between keys.
	final := f
	for i, l := range fileLeaves(&final) {
		if bad[l.path] {
			l.v.Set(defLeaves[i].v)
		}
	}
	for _, g := range checkGroups {
		if err := g.check(final, secrets, getenv); err != nil {
			for _, e := range split(err) {
				if !seenMsg[e.Error()] {
					seenMsg[e.Error()] = true
					errs = append(errs, &ConfigError{Path: sectionOfMessage(g.name, e.Error()), Msg: e.Error()})
				}
			}
		}
	}
	return errs
}

// sectionOfMessage names the section a connection error is about, by the package prefix the
// packages' Validate errors start with.
func sectionOfMessage(group, msg string) string {
	if group != "connections" {
		return group
	}
	for prefix, section := range map[string]string{"kafka:": "kafka", "avro: registry": "registry", "clickhouse:": "clickhouse",
		"features:": "redis", "moderation:": "sensitive"} {
		if strings.HasPrefix(msg, prefix) {
			return section
		}
	}
	return group
}

// split flattens errors.Join trees.
func split(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, split(e)...)
		}
		return out
	}
	return []error{err}
}

// Key describes one key for the command line: flags are made from keys.
type Key struct {
	Path    string // e.g. sink_clickhouse.batch_rows
	Type    string // duration, int, bool, string or strings
	Default string // as a flag takes it
	Doc     string
}

// KeysUnder lists the keys of a section (e.g. "ingest"), or every top-level key for "".
func KeysUnder(section string) []Key {
	def := Defaults()
	var out []Key
	for _, l := range fileLeaves(&def) {
		sec, _, nested := strings.Cut(l.path, ".")
		if (section == "" && nested) || (section != "" && sec != section) {
			continue
		}
		out = append(out, Key{Path: l.path, Type: typeName(l.v), Default: stringOf(l.v), Doc: l.doc})
	}
	return out
}

// KeyInfo describes the key at path.
func KeyInfo(path string) (Key, bool) {
	def := Defaults()
	l, ok := leafByPath(fileLeaves(&def), path)
	if !ok {
		return Key{}, false
	}
	return Key{Path: l.path, Type: typeName(l.v), Default: stringOf(l.v), Doc: l.doc}, true
}

func typeName(v reflect.Value) string {
	switch {
	case v.Type() == durationType:
		return "duration"
	case v.Kind() == reflect.Slice:
		return "strings"
	}
	return v.Kind().String()
}

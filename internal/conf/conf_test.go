package conf_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/conf"
)

// tlsish stands for a settings type shared by sections, squashed into each.
type tlsish struct {
	On     bool   `key:"tls" doc:"use TLS"`
	CAFile string `key:"tls_ca_file" doc:"CA file"`
}

func (t tlsish) Validate() error {
	if t.CAFile == "bad" {
		return conf.Errorf("CAFile", "tls ca file: %q is bad", t.CAFile)
	}
	return nil
}

type conn struct {
	Addr         string        `key:"addr" default:"127.0.0.1:1" doc:"host:port"`
	DB           int           `key:"db,zero" doc:"database"`
	Timeout      time.Duration `key:"timeout" default:"5s" doc:"bound"`
	User         string        `key:"user" doc:"user"`
	Password     string        `doc:"the password"`
	PasswordFile string        `key:"password_file" secret:"Password" doc:"file holding the password"`
	TLS          tlsish        `key:",squash"`
	hook         func()        // no key
}

func (c conn) Validate() error {
	var errs []error
	if !strings.Contains(c.Addr, ":") {
		errs = append(errs, conf.Errorf("Addr", "addr: %q is not host:port", c.Addr))
	}
	if c.DB < 0 {
		errs = append(errs, conf.Errorf("DB", "db: %d is negative", c.DB))
	}
	if c.Password != "" && c.User == "" {
		errs = append(errs, conf.Errorf("Password", "user: empty while a password is set"))
	}
	errs = append(errs, conf.Nest("TLS", "", c.TLS.Validate()))
	return errors.Join(errs...)
}

type stage struct {
	Group  string   `key:"group" default:"g" doc:"the group"`
	URL    string   `key:"url" example:"http://u" doc:"where: no default"`
	Topics []string `key:"topics" default:"a,b" doc:"topics"`
	Batch  int      `key:"batch" default:"100" doc:"batch size"`
	Start  bool     `key:"from_start" default:"true" doc:"from the start"`
	Other  string   // no key
}

type conns struct {
	DB    conn `key:"db" doc:"the database"`
	Cache conn `key:"cache" doc:"the cache"`
}

type root struct {
	Name  string `key:"name" default:"x" doc:"a name"`
	conns        // embedded: its sections are top-level sections
	Stage stage  `key:"stage" doc:"the stage"`
	Note  string `key:"note" env:"OTHER_NOTE" doc:"a note"`
}

func (r root) Validate() error {
	var errs []error
	if r.Name == "bad" {
		errs = append(errs, conf.Errorf("Name", "name: bad"))
	}
	errs = append(errs, conf.Nest("DB", "db: ", r.DB.Validate()), conf.Nest("Cache", "cache: ", r.Cache.Validate()))
	if r.Stage.Group == "clash" && r.Name == "clash" {
		errs = append(errs, conf.Nest("Stage", "", errors.New("group and name clash")))
	}
	return errors.Join(errs...)
}

var schema = conf.New[root]("APP_")

func TestKeysAreDeclaredOnce(t *testing.T) {
	var paths []string
	for _, k := range schema.Keys() {
		paths = append(paths, k.Path)
	}
	want := "name db.addr db.db db.timeout db.user db.password_file db.tls db.tls_ca_file cache.addr cache.db cache.timeout cache.user cache.password_file cache.tls cache.tls_ca_file stage.group stage.url stage.topics stage.batch stage.from_start note"
	if got := strings.Join(paths, " "); got != want {
		t.Fatalf("keys\n%s\nwant\n%s", got, want)
	}
	k, _ := schema.Key("db.password_file")
	if k.Env != "APP_DB_PASSWORD_FILE" || k.Secret != "APP_DB_PASSWORD" || k.SecretDoc != "the password" || k.Type != "string" {
		t.Errorf("secret key %+v", k)
	}
	if k, _ := schema.Key("note"); k.Env != "OTHER_NOTE" {
		t.Errorf("env tag: %+v", k)
	}
	if k, _ := schema.Key("stage.topics"); k.Default != "a,b" || k.DefaultYAML() != `["a", "b"]` || k.Type != "strings" {
		t.Errorf("list key %+v", k)
	}
	if k, _ := schema.Key("db.timeout"); k.Default != "5s" || k.Type != "duration" {
		t.Errorf("duration key %+v", k)
	}
	if schema.SectionDoc("cache") != "the cache" {
		t.Errorf("section doc %q", schema.SectionDoc("cache"))
	}
	for field, path := range map[string]string{"DB.Addr": "db.addr", "DB.TLS.CAFile": "db.tls_ca_file", "DB.TLS": "db", "DB.Password": "db",
		"Stage": "stage", "Stage.Other": "stage", "Name": "name", "": ""} {
		if got := schema.PathOf(field); got != path {
			t.Errorf("PathOf(%q) = %q, want %q", field, got, path)
		}
	}
}

func TestDefaults(t *testing.T) {
	d := conf.Defaults[root]()
	if d.Name != "x" || d.DB.Addr != "127.0.0.1:1" || d.DB.Timeout != 5*time.Second || !d.Stage.Start || d.Stage.Batch != 100 ||
		!reflect.DeepEqual(d.Stage.Topics, []string{"a", "b"}) || d.DB.DB != 0 || d.Stage.URL != "" {
		t.Fatalf("defaults %+v", d)
	}
	// FillDefaults fills what is zero and leaves the rest, bools included.
	s := stage{Group: "mine", Start: false}
	conf.FillDefaults(&s)
	if s.Group != "mine" || s.Batch != 100 || s.Start || len(s.Topics) != 2 || s.URL != "" {
		t.Fatalf("filled %+v", s)
	}
}

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoad(t *testing.T) {
	secret := write(t, "pw\n")
	empty := write(t, "\n")
	tests := []struct {
		name      string
		yaml      string
		env       map[string]string
		overrides []conf.Override
		check     func(t *testing.T, r root, src conf.Sources)
		wantErr   []string // each must appear
		nErr      int
	}{
		{
			name:      "defaults, file, variables, overrides, in that order",
			yaml:      "name: file\ndb: {addr: \"f:1\", timeout: 2s}\nstage: {topics: [t1, t2], batch: 5}\n",
			env:       map[string]string{"APP_DB_ADDR": "e:1", "APP_STAGE_BATCH": "6", "OTHER_NOTE": "n"},
			overrides: []conf.Override{{Path: "stage.batch", Value: "7", Source: "--batch"}},
			check: func(t *testing.T, r root, src conf.Sources) {
				if r.Name != "file" || r.DB.Addr != "e:1" || r.DB.Timeout != 2*time.Second || r.Stage.Batch != 7 || r.Note != "n" ||
					!reflect.DeepEqual(r.Stage.Topics, []string{"t1", "t2"}) || r.Cache.Addr != "127.0.0.1:1" {
					t.Errorf("loaded %+v", r)
				}
				want := conf.Sources{"name": "file", "db.addr": "APP_DB_ADDR", "db.timeout": "file", "stage.batch": "--batch", "note": "OTHER_NOTE", "cache.addr": "default"}
				for k, v := range want {
					if src[k] != v {
						t.Errorf("source of %s = %q, want %q", k, src[k], v)
					}
				}
			},
		},
		{
			name: "a secret's variable wins over the file the config file names",
			yaml: "db: {user: u, password_file: " + secret + "}\ncache: {user: u, password_file: " + secret + "}\n",
			env:  map[string]string{"APP_DB_PASSWORD": "from-env"},
			check: func(t *testing.T, r root, _ conf.Sources) {
				if r.DB.Password != "from-env" || r.DB.PasswordFile != "" || r.Cache.Password != "" || r.Cache.PasswordFile != secret {
					t.Errorf("db %+v, cache %+v", r.DB, r.Cache)
				}
			},
		},
		{
			name: "every problem at once, each at its key with its line or variable",
			yaml: "name: bad\ndb: {addr: nohost, db: -1, timeout: 0s, brokerz: 1, password: x, tls_ca_file: bad}\n" +
				"cache: {password_file: /nonexistent/pw}\nstage: {batch: lots, topics: {a: b}}\nextra: 1\n",
			env: map[string]string{"APP_CACHE_TIMEOUT": "soon", "APP_CACHE_PASSWORD": "p"},
			wantErr: []string{
				"name (line 1): name: bad",
				`db.addr (line 2): db: addr: "nohost" is not host:port`,
				"db.db (line 2): db: db: -1 is negative",
				"db.timeout (line 2): 0s, want more than 0",
				"db.brokerz (line 2): unknown key; keys here: addr, db, timeout, user, password_file, tls, tls_ca_file",
				"db.password (line 2): secrets are never read from the config file; put it in a file and set db.password_file to its path, or set APP_DB_PASSWORD",
				`db.tls_ca_file (line 2): db: tls ca file: "bad" is bad`,
				`cache.timeout (APP_CACHE_TIMEOUT): want a duration`,
				"cache (line 3): cache: user: empty while a password is set",
				`stage.batch (line 4): want a whole number, got "lots"`,
				"stage.topics (line 4): want a single value",
				"extra (line 5): unknown key",
			},
			nErr: 12,
		},
		{
			name:    "an unreadable or empty secret file is reported at its key, once",
			yaml:    "db: {password_file: /nonexistent/pw}\ncache: {password_file: " + empty + "}\n",
			wantErr: []string{"db.password_file (line 1): cannot read the secret: open /nonexistent/pw", "cache.password_file (line 2): " + empty + " is empty"},
			nErr:    2,
		},
		{
			name:    "a rule between keys is reported at the section",
			yaml:    "name: clash\nstage: {group: clash}\n",
			wantErr: []string{"stage (line 2): group and name clash"},
			nErr:    1,
		},
		{
			name:      "a bad override names its flag",
			overrides: []conf.Override{{Path: "stage.batch", Value: "0", Source: "--batch"}, {Path: "nope", Value: "1", Source: "--nope"}},
			wantErr:   []string{"stage.batch (--batch): 0, want more than 0", "nope (--nope): no such key"},
			nErr:      2,
		},
		{
			name:    "not YAML, and a section that is no mapping",
			yaml:    "db: [x\n",
			wantErr: []string{".yaml (line 1): not valid YAML: "},
			nErr:    1,
		},
		{
			name:    "a section that is no mapping, a key given twice",
			yaml:    "db: yes\nname: a\nname: b\n",
			wantErr: []string{"db (line 1): want a mapping", "name (line 3): key given twice"},
			nErr:    2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.yaml != "" {
				path = write(t, tt.yaml)
			}
			var r root
			src, err := schema.Load(&r, path, func(k string) string { return tt.env[k] }, tt.overrides...)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, r, src)
				return
			}
			var es conf.Errors
			if !errors.As(err, &es) || !errors.Is(err, conf.ErrInvalid) {
				t.Fatalf("error %v (%T), want Errors matching ErrInvalid", err, err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("errors do not say %q:\n%s", w, err)
				}
			}
			if len(es) != tt.nErr {
				t.Errorf("%d errors, want %d:\n%s", len(es), tt.nErr, err)
			}
			if strings.Contains(err.Error(), "from-env") {
				t.Errorf("an error shows a secret:\n%s", err)
			}
		})
	}
}

// TestErrorsInKeyOrder: errors come in the order keys are declared, whatever found them.
func TestErrorsInKeyOrder(t *testing.T) {
	var r root
	_, err := schema.Load(&r, write(t, "stage: {batch: 0}\ncache: {addr: x}\nname: bad\n"), func(string) string { return "" })
	var es conf.Errors
	if !errors.As(err, &es) || len(es) != 3 {
		t.Fatalf("%v", err)
	}
	if es[0].Path != "name" || es[1].Path != "cache.addr" || es[2].Path != "stage.batch" {
		t.Fatalf("order %s, %s, %s", es[0].Path, es[1].Path, es[2].Path)
	}
}

func TestNestAndFields(t *testing.T) {
	inner := errors.Join(conf.Errorf("CAFile", "tls ca file: bad"), errors.New("whole"))
	fes := conf.Fields(conf.Nest("TLS", "kafka: ", inner))
	if len(fes) != 2 || fes[0].Field != "TLS.CAFile" || fes[0].Error() != "kafka: tls ca file: bad" || fes[1].Field != "TLS" || fes[1].Error() != "kafka: whole" {
		t.Fatalf("fields %+v", fes)
	}
	if conf.Nest("X", "p", nil) != nil || conf.Field("X", nil) != nil {
		t.Fatal("nil is not nil")
	}
	var fe *conf.FieldError
	if !errors.As(conf.Nest("A", "", conf.Errorf("B", "b")), &fe) || fe.Field != "A.B" {
		t.Fatalf("errors.As: %+v", fe)
	}
}

// TestUnknownEnv: a misspelled variable (BACKFLOW_KAFKA_BROKER) was ignored without a word. It
// is reported with the nearest name that is read; variables that are read, secrets and their
// _FILE twins, extra names and other prefixes are not.
func TestUnknownEnv(t *testing.T) {
	type section struct {
		Brokers      []string `key:"brokers" default:"a:1"`
		Password     string
		PasswordFile string `key:"password_file" secret:"Password"`
	}
	type root struct {
		Kafka section `key:"kafka"`
	}
	s := conf.New[root]("APP_")
	got := s.UnknownEnv([]string{"APP_KAFKA_BROKER=x", "APP_KAFKA_BROKERS=y", "APP_KAFKA_PASSWORD=p", "APP_KAFKA_PASSWORD_FILE=f",
		"APP_TOOL=t", "APP_SOMETHING_ELSE_ENTIRELY=z", "HOME=/root", "PATH=/bin"}, "APP_TOOL")
	want := []conf.UnknownVar{{Name: "APP_KAFKA_BROKER", Nearest: "APP_KAFKA_BROKERS"}, {Name: "APP_SOMETHING_ELSE_ENTIRELY"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("UnknownEnv = %+v, want %+v", got, want)
	}
}

// TestExampleIsShownNotApplied: a key with an example and no default (a service's address)
// carries the example for the reference, and stays empty when nothing gives it.
func TestExampleIsShownNotApplied(t *testing.T) {
	k, ok := schema.Key("stage.url")
	if !ok || k.Example != "http://u" || k.Default != "" {
		t.Fatalf("key %+v", k)
	}
	var r root
	if _, err := schema.Load(&r, "", func(string) string { return "" }); err != nil || r.Stage.URL != "" {
		t.Fatalf("loaded %q, %v", r.Stage.URL, err)
	}
}

// TestSyntaxErrorAtItsLine: a file that is not YAML is one error, at the file's path and the
// line of the problem. Regression: go.yaml.in/yaml/v3's line is where the enclosing construct
// began, counted from 0 for a parser error, so a tab on line 3 was "line 2" and an unclosed
// '[' on line 6 "line 5", and the file was named "(file)".
func TestSyntaxErrorAtItsLine(t *testing.T) {
	tests := []struct {
		name, yaml string
		line       int
		msg        string
	}{
		{name: "a tab that indents a key", yaml: "name: a\ndb:\n  addr: \"x:1\"\n\ttimeout: 2s\n", line: 4, msg: "a tab in the indentation: YAML indents with spaces only"},
		{name: "a tab on line 3", yaml: "db:\n  timeout: 2s\n\tuser: u\n", line: 3, msg: "a tab in the indentation"},
		{name: "an unclosed [ on the last line", yaml: "name: a\ndb:\n  addr: \"x:1\"\nstage:\n  batch: 5\n  topics: [a, b\n", line: 6, msg: "not valid YAML: "},
		{name: "an unclosed quote", yaml: "name: a\nstage:\n  group: \"g\n", line: 3, msg: "not valid YAML: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := write(t, tt.yaml)
			var r root
			_, err := schema.Load(&r, path, func(string) string { return "" })
			var es conf.Errors
			if !errors.As(err, &es) || len(es) != 1 {
				t.Fatalf("error %v, want one", err)
			}
			want := fmt.Sprintf("%s (line %d): ", path, tt.line)
			if got := es[0].Error(); !strings.HasPrefix(got, want) || !strings.Contains(got, tt.msg) {
				t.Fatalf("error %q, want it to start %q and say %q", got, want, tt.msg)
			}
		})
	}
}

// TestUnknownKeySuggests: an unknown key gets the nearest key of its section, or the path of
// a key of that name in another section, as a misspelled variable gets the nearest variable.
// Regression: kafka.broker was "unknown key" with a list of fourteen names to read through.
func TestUnknownKeySuggests(t *testing.T) {
	var r root
	_, err := schema.Load(&r, write(t, "db:\n  adr: \"x:1\"\n  timout: 2s\nstage:\n  from_start: true\n  group: g\n  grup: 5\nbatch: 5\nzzz: 1\n"), func(string) string { return "" })
	for _, want := range []string{
		"db.adr (line 2): unknown key; did you mean addr? (keys here: addr, db,",
		"db.timout (line 3): unknown key; did you mean timeout?",
		"stage.grup (line 7): unknown key; did you mean group? (keys here: group, url,",
		"batch (line 8): unknown key here; did you mean stage.batch? (keys here: name, db, cache, stage, note)",
		"zzz (line 9): unknown key; keys here: name, db, cache, stage, note",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("errors do not say %q:\n%v", want, err)
		}
	}
}

// Package conf declares each configuration key once, as a tagged struct field, and derives the
// rest from that declaration: YAML key and path, variable, default, reference text, and the key
// path of every validation error. Start with Schema (the keys of a struct type, and Load) and
// FieldError (what a Validate method returns).
package conf

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Key describes one key.
type Key struct {
	Path    string // e.g. sink_clickhouse.batch_rows
	Env     string // its variable, e.g. BACKFLOW_SINK_CLICKHOUSE_BATCH_ROWS
	Secret  string // for a key naming a secret's file: the variable of the secret itself
	Type    string // duration, int, bool, string or strings
	Default string // as a variable or a flag takes it; "" for none
	// Example is a value to show for a key that has no default but must be given where it is
	// used (a service's address), as a variable takes it; "" for other keys.
	Example string
	Doc     string
	// SecretDoc is the doc of the field holding the secret itself, for a Secret key.
	SecretDoc string
	Zero      bool // 0 is a valid value

	index       []int // field indexes from the root struct
	secretIndex []int // of the field holding the secret, for a Secret key
	def         reflect.Value
}

// DefaultYAML is the key's default as a YAML value: strings quoted, lists in flow style.
func (k Key) DefaultYAML() string {
	switch k.def.Kind() {
	case reflect.String:
		return strconv.Quote(k.def.String())
	case reflect.Slice:
		q := make([]string, k.def.Len())
		for i := range q {
			q[i] = strconv.Quote(k.def.Index(i).String())
		}
		return "[" + strings.Join(q, ", ") + "]"
	case reflect.Map:
		q := make([]string, 0, k.def.Len())
		for _, mk := range k.def.MapKeys() {
			q = append(q, strconv.Quote(mk.String())+": "+strconv.Quote(k.def.MapIndex(mk).String()))
		}
		sort.Strings(q)
		return "{" + strings.Join(q, ", ") + "}"
	}
	return k.Default
}

// level is one mapping of the YAML file: the root or a section.
type level struct {
	path  string
	doc   string
	names []string          // keys and sections, in declaration order
	keys  map[string]int    // name → index in Schema.keys
	subs  map[string]*level // name → section
	// inline maps the name a secret would have inline (password) to its file key
	// (password_file), so that the file is refused with where the secret goes.
	inline map[string]int
}

// Schema is the keys of a struct type, in declaration order. Build it once with New.
//
// A key is a field with a key tag:
//
//	BatchRows int `key:"batch_rows" default:"10000" doc:"flush at this many buffered records"`
//
// The tags:
//
//	key:"name"          the YAML key. Its path joins the enclosing sections' names with dots
//	                    (sink_clickhouse.batch_rows) and its variable is the path upper-cased
//	                    after the schema's prefix (BACKFLOW_SINK_CLICKHOUSE_BATCH_ROWS).
//	key:"name,zero"     0 is a valid value; every other number and duration must be above 0.
//	key:"name" on a struct field
//	                    a section: its fields' keys are nested under name.
//	key:",squash"       on a struct field: its keys are keys of the enclosing section. An
//	                    embedded struct without a key tag is squashed the same way.
//	key:",squash,omit=a+b"
//	                    squashed without the keys named.
//	key:"-"             no key (as is a field without a key tag): the loader leaves it alone.
//	default:"value"     the default, written as a variable or a flag gives it (a list
//	                    comma-separated). Without it the default is the zero value.
//	example:"value"     for a key with no default that must be given where it is used (a
//	                    service's address): a value to show in the reference, never applied.
//	doc:"text"          what the key means, for the reference; on a section, its heading.
//	env:"NAME"          the variable, where it is not the one derived from the path.
//	secret:"Field"      on a key naming a file: the file holds a secret. Field is the sibling
//	                    string field (no key) that holds the secret itself when its own
//	                    variable is set: the key's variable without _FILE. A config file
//	                    never carries a secret inline, and no flag sets one.
//
// Supported key types: string (and string kinds), bool, int, time.Duration, []string and
// map[string]string (in YAML a mapping; as a variable or flag "a=b,c=d"). A field of type
// []Struct is a list of sections (list.go).
//
// A package's withDefaults applies the declared defaults with FillDefaults, and its Validate
// returns FieldErrors (Errorf, Nest), so that Load reports each error at its key path without
// reading the message.
type Schema struct {
	typ    reflect.Type
	prefix string
	keys   []Key
	byPath map[string]int
	root   *level
	levels map[string]*level // by path; "" is the root
	// byField maps a Go field path (SASL.Mechanism; embedded structs left out) to the key path
	// or section path its errors are reported at.
	byField map[string]string
	lists   []*List // lists of sections (list.go)
}

// New returns the schema of T, whose variables start with envPrefix (e.g. "BACKFLOW_"). It
// panics on a tag it cannot use: that is a mistake in the declaration, found by any test.
func New[T any](envPrefix string) *Schema {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("conf: %s is not a struct", t))
	}
	s := &Schema{typ: t, prefix: envPrefix, byPath: map[string]int{}, levels: map[string]*level{}, byField: map[string]string{}}
	s.root = s.newLevel("", "")
	s.walk(t, nil, "", s.root, nil)
	return s
}

func (s *Schema) newLevel(path, doc string) *level {
	l := &level{path: path, doc: doc, keys: map[string]int{}, subs: map[string]*level{}, inline: map[string]int{}}
	s.levels[path] = l
	return l
}

var durationType = reflect.TypeFor[time.Duration]()

// parseTag splits a key tag into its name and options.
func parseTag(tag string) (name string, opts map[string]string) {
	parts := strings.Split(tag, ",")
	opts = map[string]string{}
	for _, o := range parts[1:] {
		k, v, _ := strings.Cut(o, "=")
		opts[k] = v
	}
	return parts[0], opts
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "." + b
}

func (s *Schema) walk(t reflect.Type, index []int, goPath string, lvl *level, omit map[string]bool) {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, tagged := sf.Tag.Lookup("key")
		isStruct := sf.Type.Kind() == reflect.Struct && sf.Type != durationType
		if !tagged && !(sf.Anonymous && isStruct) {
			continue
		}
		name, opts := parseTag(tag)
		if name == "-" {
			continue
		}
		idx := append(append([]int(nil), index...), i)
		gp := goPath
		if !sf.Anonymous {
			gp = join(goPath, sf.Name)
		}
		_, squash := opts["squash"]
		switch {
		case isList(sf.Type):
			s.addList(sf, name, idx, gp, lvl)
		case isStruct && (squash || !tagged):
			drop := map[string]bool{}
			for k := range omit {
				drop[k] = true
			}
			if o := opts["omit"]; o != "" {
				for _, k := range strings.Split(o, "+") {
					drop[k] = true
				}
			}
			s.byField[gp] = lvl.path
			s.walk(sf.Type, idx, gp, lvl, drop)
		case isStruct:
			sub := s.newLevel(join(lvl.path, name), sf.Tag.Get("doc"))
			lvl.names = append(lvl.names, name)
			lvl.subs[name] = sub
			s.byField[gp] = sub.path
			s.walk(sf.Type, idx, gp, sub, nil)
		case omit[name]:
		default:
			s.addKey(t, sf, name, opts, idx, gp, lvl)
		}
	}
}

func (s *Schema) addKey(parent reflect.Type, sf reflect.StructField, name string, opts map[string]string, idx []int, gp string, lvl *level) {
	path := join(lvl.path, name)
	if _, dup := s.byPath[path]; dup || lvl.subs[name] != nil || (lvl.path == "" && s.list(name) != nil) {
		panic("conf: key " + path + " declared twice")
	}
	k := Key{Path: path, Doc: sf.Tag.Get("doc"), index: idx, Type: typeName(sf.Type)}
	if k.Type == "" {
		panic(fmt.Sprintf("conf: key %s: unsupported type %s", path, sf.Type))
	}
	_, k.Zero = opts["zero"]
	k.Env = sf.Tag.Get("env")
	if k.Env == "" {
		k.Env = s.EnvName(path)
	}
	k.def = reflect.New(sf.Type).Elem()
	if d, ok := sf.Tag.Lookup("default"); ok {
		if err := setString(k.def, d); err != nil {
			panic(fmt.Sprintf("conf: key %s: default: %v", path, err))
		}
	}
	k.Default = stringOf(k.def)
	k.Example = sf.Tag.Get("example")
	if f := sf.Tag.Get("secret"); f != "" {
		inl, ok := parent.FieldByName(f)
		if !ok || inl.Type.Kind() != reflect.String || sf.Type.Kind() != reflect.String {
			panic(fmt.Sprintf("conf: key %s: secret field %s is not a string field beside it", path, f))
		}
		k.Secret = strings.TrimSuffix(k.Env, "_FILE")
		if k.Secret == k.Env {
			panic(fmt.Sprintf("conf: key %s: a secret's key names its file and ends in _file", path))
		}
		k.SecretDoc = inl.Tag.Get("doc")
		k.secretIndex = append(append([]int(nil), idx[:len(idx)-1]...), inl.Index...)
		lvl.inline[strings.TrimSuffix(name, "_file")] = len(s.keys)
	}
	s.byPath[path] = len(s.keys)
	s.byField[gp] = path
	lvl.names = append(lvl.names, name)
	lvl.keys[name] = len(s.keys)
	s.keys = append(s.keys, k)
}

func typeName(t reflect.Type) string {
	switch {
	case t == durationType:
		return "duration"
	case t.Kind() == reflect.String:
		return "string"
	case t.Kind() == reflect.Bool:
		return "bool"
	case t.Kind() == reflect.Int:
		return "int"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return "strings"
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String:
		return "mapping"
	}
	return ""
}

// EnvName is the variable of a key path: sink_clickhouse.batch_rows is
// <prefix>SINK_CLICKHOUSE_BATCH_ROWS.
func (s *Schema) EnvName(path string) string {
	return s.prefix + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(path))
}

// Keys lists every key, in declaration order (the order of the reference).
func (s *Schema) Keys() []Key { return append([]Key(nil), s.keys...) }

// Key returns the key at path.
func (s *Schema) Key(path string) (Key, bool) {
	i, ok := s.byPath[path]
	if !ok {
		return Key{}, false
	}
	return s.keys[i], true
}

// SectionDoc is the doc of the section at path ("" when it has none or is no section).
func (s *Schema) SectionDoc(path string) string {
	if l, ok := s.levels[path]; ok {
		return l.doc
	}
	return ""
}

// PathOf is the key path (or the section path) an error about the Go field path field is
// reported at: the key the field declares, or else the nearest enclosing section. Embedded
// structs are not part of a field path.
func (s *Schema) PathOf(field string) string {
	if p, ok := s.listPathOf(field); ok {
		return p
	}
	for {
		if p, ok := s.byField[field]; ok {
			return p
		}
		i := strings.LastIndex(field, ".")
		if i < 0 {
			return ""
		}
		field = field[:i]
	}
}

// Defaults returns T with every key at its default.
func Defaults[T any]() T {
	var v T
	setDefaults(reflect.ValueOf(&v).Elem(), false)
	return v
}

// FillDefaults sets every key of *ptr that holds its zero value to its default: what a
// package's withDefaults does. A bool is left alone (false cannot be told from unset): a
// bool that defaults to true is true where the configuration is loaded, not in a struct a
// program fills in.
func FillDefaults[T any](ptr *T) { setDefaults(reflect.ValueOf(ptr).Elem(), true) }

type defaultsCache struct {
	sync.Mutex
	m map[reflect.Type][]Key
}

var cache = defaultsCache{m: map[reflect.Type][]Key{}}

// keysOf is the keys of t, as FillDefaults uses them (cached: withDefaults runs often).
func keysOf(t reflect.Type) []Key {
	cache.Lock()
	defer cache.Unlock()
	ks, ok := cache.m[t]
	if !ok {
		s := &Schema{typ: t, byPath: map[string]int{}, levels: map[string]*level{}, byField: map[string]string{}}
		s.root = s.newLevel("", "")
		s.walk(t, nil, "", s.root, nil)
		ks = s.keys
		cache.m[t] = ks
	}
	return ks
}

func setDefaults(v reflect.Value, onlyZero bool) {
	for _, k := range keysOf(v.Type()) {
		f := v.FieldByIndex(k.index)
		if onlyZero && (!f.IsZero() || f.Kind() == reflect.Bool) {
			continue
		}
		f.Set(k.def)
	}
}

// setString sets a key from its string form (a variable, a flag, a YAML scalar).
func setString(v reflect.Value, s string) error {
	s = strings.TrimSpace(s)
	switch {
	case v.Type() == durationType:
		d, err := ParseDuration(s)
		if err != nil {
			return err
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
		list := reflect.MakeSlice(v.Type(), 0, 0)
		for _, x := range strings.Split(s, ",") {
			if x = strings.TrimSpace(x); x != "" {
				list = reflect.Append(list, reflect.ValueOf(x).Convert(v.Type().Elem()))
			}
		}
		if list.Len() == 0 {
			list = reflect.Zero(v.Type())
		}
		v.Set(list)
	case v.Kind() == reflect.Map:
		m := reflect.MakeMap(v.Type())
		for _, x := range strings.Split(s, ",") {
			if x = strings.TrimSpace(x); x == "" {
				continue
			}
			a, b, ok := strings.Cut(x, "=")
			if !ok {
				return fmt.Errorf("want name=value pairs, got %q", x)
			}
			m.SetMapIndex(reflect.ValueOf(strings.TrimSpace(a)).Convert(v.Type().Key()), reflect.ValueOf(strings.TrimSpace(b)).Convert(v.Type().Elem()))
		}
		if m.Len() == 0 {
			m = reflect.Zero(v.Type())
		}
		v.Set(m)
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
		items := make([]string, v.Len())
		for i := range items {
			items[i] = v.Index(i).String()
		}
		return strings.Join(items, ",")
	case v.Kind() == reflect.Map:
		items := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			items = append(items, k.String()+"="+v.MapIndex(k).String())
		}
		sort.Strings(items)
		return strings.Join(items, ",")
	}
	return fmt.Sprint(v.Interface())
}

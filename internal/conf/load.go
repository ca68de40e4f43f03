package conf

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Override is a value given on the command line for a key.
type Override struct {
	Path   string // key path
	Value  string // as a flag takes it: lists comma-separated
	Source string // e.g. "--batch-rows"
}

// Sources says where each key's value came from: "default", "file", a variable or an
// override's Source.
type Sources map[string]string

// Validator is a configuration that checks itself. Its errors are FieldErrors (or errors
// about the whole).
type Validator interface{ Validate() error }

// Load fills *dst, a struct of the schema's type: the declared defaults, then the YAML file
// at path (none when path is ""), then every variable getenv returns (os.Getenv when nil),
// then overrides; a secret's own variable wins over the file its key names in the file. It
// then checks everything: the form of each value, the secret files, that numbers and
// durations are above 0 (unless the key says zero), and dst's own Validate. It returns every
// problem at once as Errors, in key order, each at its key path with where its value came
// from; Validate's errors are placed by their FieldError's field.
func (s *Schema) Load(dst any, path string, getenv func(string) string, overrides ...Override) (Sources, error) {
	return s.load(dst, path, getenv, false, overrides)
}

// LoadOffline checks the file at path alone, as it would be checked where it is deployed:
// no variable of the environment is read, and the secret files it names are not opened (they exist where it
// runs, not where it is checked). Everything else is checked as Load checks it; dst holds a
// placeholder, not a secret, for each secret file.
//
// getenv, when not nil, gives the variables of where it is deployed (an env file's): they are
// read as Load reads them, and nothing else is.
func (s *Schema) LoadOffline(dst any, path string, getenv func(string) string) (Sources, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	return s.load(dst, path, getenv, true, nil)
}

func (s *Schema) load(dst any, path string, getenv func(string) string, offline bool, overrides []Override) (Sources, error) {
	root := reflect.ValueOf(dst)
	if root.Kind() != reflect.Pointer || root.Elem().Type() != s.typ {
		panic(fmt.Sprintf("conf: Load into %T, want *%s", dst, s.typ))
	}
	root = root.Elem()
	if getenv == nil {
		getenv = os.Getenv
	}
	l := &loader{s: s, root: root, sources: Sources{}, lines: map[string]int{}, bad: map[string]bool{}, offline: offline}
	root.Set(reflect.New(s.typ).Elem())
	setDefaults(root, false)
	for _, k := range s.keys {
		l.sources[k.Path] = "default"
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return l.sources, Errors{{Path: "--config", Msg: err.Error()}}
		}
		if e := l.decodeFile(path, data); e != nil {
			// Nothing else is known about a file that is not YAML: what follows would be
			// guesses (every address "not set"), so its syntax error is reported alone.
			return l.sources, Errors{e}
		}
	}
	for _, k := range s.keys {
		if v := getenv(k.Env); v != "" {
			if err := setString(l.field(k), v); err != nil {
				l.errs = append(l.errs, &Error{Path: k.Path, Source: k.Env, Msg: err.Error()})
				l.bad[k.Path] = true
				continue
			}
			l.sources[k.Path] = k.Env
		}
	}
	for _, o := range overrides {
		k, ok := s.Key(o.Path)
		if !ok {
			l.errs = append(l.errs, &Error{Path: o.Path, Source: o.Source, Msg: "no such key"})
			continue
		}
		if err := setString(l.field(k), o.Value); err != nil {
			l.errs = append(l.errs, &Error{Path: o.Path, Source: o.Source, Msg: err.Error()})
			l.bad[k.Path] = true
			continue
		}
		l.sources[k.Path] = o.Source
	}
	l.secrets(getenv)
	l.empty()
	l.positive()
	l.validate()
	if len(l.errs) > 0 {
		l.sort()
		return l.sources, l.errs
	}
	return l.sources, nil
}

type loader struct {
	s       *Schema
	root    reflect.Value
	sources Sources
	lines   map[string]int
	bad     map[string]bool // keys already reported: not checked again
	errs    Errors
	offline bool // LoadOffline: secret files are not opened
}

func (l *loader) field(k Key) reflect.Value { return l.root.FieldByIndex(k.index) }

// add reports a problem with the value of the key (or section) at path.
func (l *loader) add(path, msg string) {
	e := &Error{Path: path, Msg: msg}
	switch src := l.sources[path]; src {
	case "file":
		e.Line = l.lines[path]
	case "default", "":
		// A section's rule (or a key of a list item left at its default): the section's (or
		// the item's) line.
		if ln, ok := l.lines[path]; ok {
			e.Line = ln
		} else if i := strings.Index(path, "]"); i > 0 {
			e.Line = l.lines[path[:i+1]]
		}
	default:
		e.Source = src
	}
	l.errs = append(l.errs, e)
	l.bad[path] = true
}

// decodeFile decodes YAML key by key, so that every unknown key, inline secret and bad value
// is reported with its path and line, not only the first. A file that is not YAML is one
// error, returned, at the file's path and the problem's line.
func (l *loader) decodeFile(path string, data []byte) *Error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return syntaxError(path, data, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil // empty file: every default
	}
	l.decodeMapping(doc.Content[0], l.s.root)
	return nil
}

func (l *loader) decodeMapping(n *yaml.Node, lvl *level) {
	at := lvl.path
	if at == "" {
		at = "(top level)"
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if n.Kind != yaml.MappingNode {
		l.errs = append(l.errs, &Error{Path: at, Line: n.Line, Msg: "want a mapping of keys to values"})
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		name := kn.Value
		path := join(lvl.path, name)
		if seen[name] {
			l.errs = append(l.errs, &Error{Path: path, Line: kn.Line, Msg: "key given twice"})
			continue
		}
		seen[name] = true
		if sub, ok := lvl.subs[name]; ok {
			l.lines[path] = kn.Line
			l.decodeMapping(vn, sub)
			continue
		}
		if lst := l.s.list(name); lst != nil && lvl.path == "" {
			l.decodeList(vn, lst)
			continue
		}
		ki, ok := lvl.keys[name]
		if !ok {
			l.errs = append(l.errs, &Error{Path: path, Line: kn.Line, Msg: l.unknownKey(lvl, name)})
			continue
		}
		k := l.s.keys[ki]
		if err := decodeLeaf(vn, l.field(k)); err != nil {
			l.errs = append(l.errs, &Error{Path: path, Line: vn.Line, Msg: err.Error()})
			l.bad[path] = true
			continue
		}
		l.sources[path] = "file"
		l.lines[path] = vn.Line
	}
}

func (l *loader) unknownKey(lvl *level, name string) string {
	if ki, ok := lvl.inline[name]; ok {
		k := l.s.keys[ki]
		return fmt.Sprintf("secrets are never read from the config file; put it in a file and set %s to its path, or set %s", k.Path, k.Secret)
	}
	if secretKey(name) {
		return "secrets are never read from the config file; pass it in an environment variable or a file (see the config reference)"
	}
	return l.s.unknownKey(lvl, name)
}

// unknownKey says that name is no key of lvl, with the nearest name there (a misspelling) or
// else the path of a key of that name elsewhere (a key put in the wrong section), and the
// keys lvl has.
func (s *Schema) unknownKey(lvl *level, name string) string {
	here := strings.Join(lvl.names, ", ")
	if n := Nearest(name, lvl.names); n != "" {
		return fmt.Sprintf("unknown key; did you mean %s? (keys here: %s)", n, here)
	}
	var elsewhere []string
	for _, k := range s.keys {
		if k.Path != join(lvl.path, name) && (k.Path == name || strings.HasSuffix(k.Path, "."+name)) {
			elsewhere = append(elsewhere, k.Path)
		}
	}
	if len(elsewhere) > 0 {
		return fmt.Sprintf("unknown key here; did you mean %s? (keys here: %s)", strings.Join(elsewhere, " or "), here)
	}
	return fmt.Sprintf("unknown key; keys here: %s", here)
}

// Nearest is the name of names closest to name, when it is close enough to be a misspelling
// of it: at most a third of its letters (and 1 at least) added, dropped or changed. "" for none.
func Nearest(name string, names []string) string {
	best, out := max(1, len(name)/3)+1, ""
	for _, n := range names {
		if d := distance(name, n); d < best {
			best, out = d, n
		}
	}
	return out
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

func decodeLeaf(n *yaml.Node, v reflect.Value) error {
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		return nil // key: with no value keeps the default
	case n.Kind == yaml.MappingNode && v.Kind() == reflect.Map:
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i+1].Kind != yaml.ScalarNode {
				return errors.New("want a mapping of names to single values")
			}
			m.SetMapIndex(reflect.ValueOf(n.Content[i].Value).Convert(v.Type().Key()), reflect.ValueOf(n.Content[i+1].Value).Convert(v.Type().Elem()))
		}
		v.Set(m)
		return nil
	case n.Kind == yaml.SequenceNode && v.Kind() == reflect.Slice:
		list := reflect.MakeSlice(v.Type(), 0, len(n.Content))
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return errors.New("want a list of strings")
			}
			list = reflect.Append(list, reflect.ValueOf(item.Value).Convert(v.Type().Elem()))
		}
		if list.Len() == 0 {
			list = reflect.Zero(v.Type()) // [] is no list, as an empty variable is
		}
		v.Set(list)
		return nil
	case n.Kind == yaml.ScalarNode:
		return setString(v, n.Value)
	}
	return errors.New("want a single value, not a mapping or list")
}

// readFile reads a config file.
func readFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("conf: %w", err)
	}
	return data, nil
}

// secrets puts each secret given in its own variable in its field. The variable wins over a
// file named in the config file (or by default); a file named by a variable or a flag as well
// is left for Validate to refuse (one would silently win). A secret's file is read once here,
// so that a missing or empty file is reported at its key.
func (l *loader) secrets(getenv func(string) string) {
	for _, k := range l.s.keys {
		if k.Secret == "" {
			continue
		}
		file := l.field(k)
		if v := getenv(k.Secret); v != "" {
			l.root.FieldByIndex(k.secretIndex).SetString(v)
			if src := l.sources[k.Path]; src == "file" || src == "default" {
				file.SetString("")
			}
			continue
		}
		path := file.String()
		if path == "" || l.bad[k.Path] {
			continue
		}
		if l.offline {
			// The file is where the config is deployed; stand in for its secret so the
			// rules between keys (a user needs a password) still hold.
			file.SetString("")
			l.root.FieldByIndex(k.secretIndex).SetString("(offline: " + path + " not read)")
			continue
		}
		data, err := os.ReadFile(path)
		switch {
		case err != nil:
			l.add(k.Path, fmt.Sprintf("cannot read the secret: %v", err))
		case strings.TrimRight(string(data), "\r\n") == "":
			l.add(k.Path, fmt.Sprintf("%s is empty", path))
		}
	}
}

// positive checks that every number and duration is above 0, unless its key says zero: 0
// means "the default" to the packages, so a 0 given is a mistake.
func (l *loader) positive() {
	for _, k := range l.s.keys {
		if l.bad[k.Path] || k.Zero || (k.Type != "int" && k.Type != "duration") {
			continue
		}
		if v := l.field(k); v.Int() <= 0 {
			l.add(k.Path, fmt.Sprintf("%s, want more than 0", stringOf(v)))
		}
	}
}

// empty reports a key with a default that the file, a variable or a flag set to nothing (an
// empty string or list): the packages would quietly take the default, the local stack's
// loopback address for a connection, which is not what an empty brokers or addr asked for.
func (l *loader) empty() {
	for _, k := range l.s.keys {
		if l.bad[k.Path] || k.Default == "" || l.sources[k.Path] == "default" {
			continue
		}
		if v := l.field(k); (v.Kind() == reflect.String || v.Kind() == reflect.Slice) && v.Len() == 0 {
			l.add(k.Path, fmt.Sprintf("empty; give a value, or leave the key out for its default (%s)", k.Default))
		}
	}
}

// validate runs the configuration's own Validate on a copy with the keys already reported put
// back to their defaults, so that their errors are not repeated and do not hide the rest.
// Each error goes to the key its FieldError names.
func (l *loader) validate() {
	if _, ok := l.root.Addr().Interface().(Validator); !ok {
		return
	}
	cp := reflect.New(l.s.typ)
	cp.Elem().Set(l.root)
	for _, k := range l.s.keys {
		if l.bad[k.Path] {
			cp.Elem().FieldByIndex(k.index).Set(k.def)
		}
	}
	v := cp.Interface().(Validator)
	reported := maps.Clone(l.bad)
	seen := map[string]bool{}
	for _, fe := range Fields(v.Validate()) {
		path := l.s.PathOf(fe.Field)
		if path == "" {
			path = "(top level)"
		}
		msg := fe.Error()
		if reported[path] || seen[path+"\x00"+msg] {
			continue
		}
		seen[path+"\x00"+msg] = true
		l.add(path, msg)
		l.errs[len(l.errs)-1].Err = fe
	}
}

var listIndex = regexp.MustCompile(`^[a-z0-9_]+\[`)

// sort orders the errors as the keys are declared. An unknown key or a section's error takes
// the place of its section's first key; an error outside every section comes last.
func (l *loader) sort() {
	rank := func(p string) int {
		if n, ok := l.s.byPath[p]; ok {
			return n
		}
		if m := listIndex.FindStringIndex(p); m != nil {
			return len(l.s.keys) // after the sections, in the file's order
		}
		best := len(l.s.keys)
		section, _, _ := strings.Cut(p, ".")
		for n, k := range l.s.keys {
			if strings.HasPrefix(k.Path, section+".") {
				best = min(best, n)
				break
			}
		}
		return best
	}
	slices.SortStableFunc(l.errs, func(a, b *Error) int { return rank(a.Path) - rank(b.Path) })
}

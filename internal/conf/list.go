package conf

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// A list of sections is a field whose type is a slice of structs, tagged like a section:
//
//	Streams []Stream `key:"streams" doc:"declared streams, one section each"`
//
// In YAML it is a sequence of mappings, each a section of the struct's keys, declared once on
// the struct like every other key (default, doc, example). Each item starts from the declared
// defaults; a key not given keeps its default. Its keys' paths carry the item's index from 0:
// streams[1].dedupe_key, which is where a Validate error about the Go field path
// Streams[1].DedupeKey is reported, with the line of the value in the file. A list has no
// variables and no flags: it is given in the file only (its doc should say so).

// List describes a list of sections.
type List struct {
	Path string // e.g. streams
	Doc  string
	// Keys are the keys of one item, each with its path under Path+"[]" (streams[].topic);
	// Env is empty.
	Keys []Key

	index  []int   // of the slice field
	elem   *Schema // the item's keys
	goPath string  // the slice field's Go path (Streams)
}

// Lists lists the lists of sections, in declaration order.
func (s *Schema) Lists() []List {
	out := make([]List, len(s.lists))
	for i, l := range s.lists {
		out[i] = *l
	}
	return out
}

func isList(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct
}

func (s *Schema) addList(sf reflect.StructField, name string, idx []int, gp string, lvl *level) {
	if lvl.path != "" {
		panic("conf: list " + name + ": lists of sections are top-level keys only")
	}
	if _, dup := s.byPath[name]; dup || lvl.subs[name] != nil || s.list(name) != nil {
		panic("conf: key " + name + " declared twice")
	}
	elem := &Schema{typ: sf.Type.Elem(), byPath: map[string]int{}, levels: map[string]*level{}, byField: map[string]string{}}
	elem.root = elem.newLevel("", "")
	elem.walk(sf.Type.Elem(), nil, "", elem.root, nil)
	if len(elem.lists) > 0 {
		panic("conf: list " + name + ": a list inside a list")
	}
	l := &List{Path: name, Doc: sf.Tag.Get("doc"), index: idx, elem: elem, goPath: gp}
	for _, k := range elem.keys {
		if k.Secret != "" {
			panic("conf: list " + name + ": a secret inside a list")
		}
		k.Path = name + "[]." + k.Path
		k.Env = ""
		l.Keys = append(l.Keys, k)
	}
	lvl.names = append(lvl.names, name)
	s.lists = append(s.lists, l)
}

func (s *Schema) list(name string) *List {
	for _, l := range s.lists {
		if l.Path == name {
			return l
		}
	}
	return nil
}

var goIndex = regexp.MustCompile(`^([A-Za-z0-9_]+)\[(\d+)\](?:\.(.*))?$`)

// listPathOf is PathOf for a Go field path into a list item (Streams[1].DedupeKey).
func (s *Schema) listPathOf(field string) (string, bool) {
	m := goIndex.FindStringSubmatch(field)
	if m == nil {
		return "", false
	}
	for _, l := range s.lists {
		if l.goPath != m[1] {
			continue
		}
		item := l.Path + "[" + m[2] + "]"
		if m[3] == "" {
			return item, true
		}
		if p := l.elem.PathOf(m[3]); p != "" {
			return item + "." + p, true
		}
		return item, true
	}
	return "", false
}

// decodeList decodes a sequence of sections into the list's slice, each item from the
// declared defaults, reporting each problem at the item's key path and line.
func (l *loader) decodeList(n *yaml.Node, lst *List) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if n.Kind != yaml.SequenceNode {
		l.errs = append(l.errs, &Error{Path: lst.Path, Line: n.Line, Msg: "want a list of sections (- key: value)"})
		return
	}
	slice := reflect.MakeSlice(l.root.FieldByIndex(lst.index).Type(), 0, len(n.Content))
	for i, item := range n.Content {
		at := lst.Path + "[" + strconv.Itoa(i) + "]"
		l.sources[at], l.lines[at] = "file", item.Line
		v := reflect.New(lst.elem.typ).Elem()
		setDefaults(v, false)
		if item.Kind != yaml.MappingNode {
			l.errs = append(l.errs, &Error{Path: at, Line: item.Line, Msg: "want a section (a mapping of keys to values)"})
			slice = reflect.Append(slice, v)
			continue
		}
		seen := map[string]bool{}
		given := map[string]bool{}
		for j := 0; j+1 < len(item.Content); j += 2 {
			kn, vn := item.Content[j], item.Content[j+1]
			path := at + "." + kn.Value
			if seen[kn.Value] {
				l.errs = append(l.errs, &Error{Path: path, Line: kn.Line, Msg: "key given twice"})
				continue
			}
			seen[kn.Value] = true
			ki, ok := lst.elem.root.keys[kn.Value]
			if !ok {
				msg := lst.elem.unknownKey(lst.elem.root, kn.Value)
				if secretKey(kn.Value) {
					msg = "secrets are never read from the config file"
				}
				l.errs = append(l.errs, &Error{Path: path, Line: kn.Line, Msg: msg})
				continue
			}
			k := lst.elem.keys[ki]
			if err := decodeLeaf(vn, v.FieldByIndex(k.index)); err != nil {
				l.errs = append(l.errs, &Error{Path: path, Line: vn.Line, Msg: err.Error()})
				l.bad[path] = true
				continue
			}
			given[kn.Value] = true
			l.sources[path], l.lines[path] = "file", vn.Line
		}
		// The rules every key follows (positive numbers, no empty value for a key with a
		// default), item by item.
		for _, k := range lst.elem.keys {
			path := at + "." + k.Path
			if !given[k.Path] || l.bad[path] {
				continue
			}
			f := v.FieldByIndex(k.index)
			switch {
			case !k.Zero && (k.Type == "int" || k.Type == "duration") && f.Int() <= 0:
				l.add(path, fmt.Sprintf("%s, want more than 0", stringOf(f)))
				f.Set(k.def)
			case k.Default != "" && (f.Kind() == reflect.String || f.Kind() == reflect.Slice) && f.Len() == 0:
				l.add(path, fmt.Sprintf("empty; give a value, or leave the key out for its default (%s)", k.Default))
				f.Set(k.def)
			}
		}
		slice = reflect.Append(slice, v)
	}
	if slice.Len() == 0 {
		slice = reflect.Zero(slice.Type()) // [] is no list, as for a list of strings
	}
	l.root.FieldByIndex(lst.index).Set(slice)
	l.sources[lst.Path] = "file"
	l.lines[lst.Path] = n.Line
}

// Lines returns the line in the YAML file at path of every key and list item it gives, by key
// path (streams[1].dedupe_key): where a check made after Load, such as one against a live
// service, reports a problem.
func (s *Schema) Lines(path string) (map[string]int, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("conf: %s: %w", path, err)
	}
	out := map[string]int{}
	var walk func(n *yaml.Node, at string)
	walk = func(n *yaml.Node, at string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := n.Content[i].Value
				if at != "" {
					p = at + "." + p
				}
				out[p] = n.Content[i+1].Line
				walk(n.Content[i+1], p)
			}
		case yaml.SequenceNode:
			for i, item := range n.Content {
				p := at + "[" + strconv.Itoa(i) + "]"
				out[p] = item.Line
				walk(item, p)
			}
		}
	}
	if len(doc.Content) > 0 {
		walk(doc.Content[0], "")
	}
	return out, nil
}

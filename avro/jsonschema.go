package avro

// JSON Schema subjects (schemaType JSON), read like Protobuf ones (proto.go): the schema is
// shown to the schema engine as the Avro record it maps to (JSONRecordSchema), a value is
// validated against the schema (santhosh-tekuri/jsonschema) and shaped into the map a generic
// Avro decode gives (JSONDecoder, jsonschema_decode.go).
//
// The mapping (docs/streams.md has the table): an object with properties is a record, its
// properties in the schema's order, each one the object does not require ["null", T] (null
// when absent); an object with no properties but an additionalProperties schema is a map of
// it; an array is an array of its items; string, integer, number and boolean are string,
// long, double and boolean; a string with format date-time is a timestamp-micros long, with
// format date a date; a string enum whose values are names is an enum; a local $ref is
// followed (one that recurses, and anything else: a composition, an open object, several
// types) is a string holding the value as JSON.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/hamba/avro/v2"
)

// jsonObject is a JSON object with its keys in the order the text has them.
type jsonObject struct {
	keys []string
	vals map[string]any
}

// parseOrdered parses JSON text keeping each object's key order (objects are *jsonObject).
func parseOrdered(text string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	v, err := orderedValue(dec)
	if err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("text after the schema")
	}
	return v, nil
}

func orderedValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &jsonObject{vals: map[string]any{}}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := orderedValue(dec)
			if err != nil {
				return nil, err
			}
			key, _ := k.(string)
			if _, dup := o.vals[key]; !dup {
				o.keys = append(o.keys, key)
			}
			o.vals[key] = v
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		var list []any
		for dec.More() {
			v, err := orderedValue(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token()
		return list, err
	}
	return tok, nil
}

var avroName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// JSONRecordSchema is the Avro record a JSON Schema's root object maps to (the package
// comment of jsonschema.go has the mapping). A root that is not an object with properties,
// or a property name Avro cannot take, is an error naming it.
func JSONRecordSchema(text string) (avro.Schema, error) {
	root, err := parseOrdered(text)
	if err != nil {
		return nil, fmt.Errorf("parse the JSON Schema: %w", err)
	}
	obj, ok := root.(*jsonObject)
	if !ok {
		return nil, fmt.Errorf("the JSON Schema is not an object")
	}
	b := &jsonAvro{root: obj, open: map[string]bool{}, names: map[string]int{}}
	t, err := b.schema(obj, "record")
	if err != nil {
		return nil, err
	}
	if m, ok := t.(map[string]any); !ok || m["type"] != "record" {
		return nil, fmt.Errorf("the JSON Schema's root is not an object with properties")
	}
	out, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	s, err := avro.ParseWithCache(string(out), "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("the JSON Schema as an Avro record: %w", err)
	}
	return s, nil
}

type jsonAvro struct {
	root  *jsonObject
	open  map[string]bool // $refs being followed
	names map[string]int  // record and enum names given
}

// name is a unique Avro name made from hint.
func (b *jsonAvro) name(hint string) string {
	n := strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, hint)
	if n == "" || n[0] >= '0' && n[0] <= '9' {
		n = "t_" + n
	}
	b.names[n]++
	if c := b.names[n]; c > 1 {
		n = fmt.Sprintf("%s_%d", n, c)
	}
	return n
}

// schema is the Avro JSON form of one JSON Schema node; name hints the name of a record or enum.
func (b *jsonAvro) schema(node any, name string) (any, error) {
	obj, ok := node.(*jsonObject)
	if !ok {
		return "string", nil // true, false: any value, as JSON
	}
	if ref, ok := obj.vals["$ref"].(string); ok {
		return b.ref(ref)
	}
	typ, nullable := jsonType(obj.vals["type"])
	var t any
	var err error
	switch typ {
	case "object":
		t, err = b.object(obj, name)
	case "array":
		var items any = "string"
		if it, ok := obj.vals["items"]; ok {
			if items, err = b.schema(it, name+"_item"); err != nil {
				return nil, err
			}
		}
		t = map[string]any{"type": "array", "items": items}
	case "string":
		t = b.str(obj, name)
	case "integer":
		t = "long"
	case "number":
		t = "double"
	case "boolean":
		t = "boolean"
	default: // a composition, several types, or none: the value as JSON
		t = "string"
	}
	if err != nil {
		return nil, err
	}
	if nullable {
		return []any{"null", t}, nil
	}
	return t, nil
}

// jsonType is a node's one type besides null, and whether null is allowed too; "" for none
// or several.
func jsonType(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, false
	case []any:
		var types []string
		null := false
		for _, e := range x {
			if s, _ := e.(string); s == "null" {
				null = true
			} else {
				types = append(types, s)
			}
		}
		if len(types) == 1 {
			return types[0], null
		}
	}
	return "", false
}

func (b *jsonAvro) object(obj *jsonObject, name string) (any, error) {
	props, _ := obj.vals["properties"].(*jsonObject)
	if props == nil || len(props.keys) == 0 {
		if ap, ok := obj.vals["additionalProperties"].(*jsonObject); ok {
			values, err := b.schema(ap, name+"_value")
			if err != nil {
				return nil, err
			}
			return map[string]any{"type": "map", "values": values}, nil
		}
		return "string", nil // an open object: as JSON
	}
	var required []string
	if list, ok := obj.vals["required"].([]any); ok {
		for _, r := range list {
			if s, ok := r.(string); ok {
				required = append(required, s)
			}
		}
	}
	fields := []any{}
	for _, k := range props.keys {
		if !avroName.MatchString(k) {
			return nil, fmt.Errorf("property %q: a column needs a name of letters, digits and '_'", k)
		}
		t, err := b.schema(props.vals[k], name+"_"+k)
		if err != nil {
			return nil, fmt.Errorf("property %s: %w", k, err)
		}
		f := map[string]any{"name": k, "type": t}
		_, union := t.([]any)
		switch {
		case !slices.Contains(required, k) && !union:
			f["type"], f["default"] = []any{"null", t}, nil
		case union:
			f["default"] = nil
		}
		fields = append(fields, f)
	}
	return map[string]any{"type": "record", "name": b.name(name), "fields": fields}, nil
}

// str is a string node's Avro type: a timestamp or date for those formats, an enum for an
// enum of names, else a string.
func (b *jsonAvro) str(obj *jsonObject, name string) any {
	switch obj.vals["format"] {
	case "date-time":
		return map[string]any{"type": "long", "logicalType": "timestamp-micros"}
	case "date":
		return map[string]any{"type": "int", "logicalType": "date"}
	}
	list, ok := obj.vals["enum"].([]any)
	if !ok || len(list) == 0 {
		return "string"
	}
	var symbols []string
	for _, e := range list {
		s, ok := e.(string)
		if !ok || !avroName.MatchString(s) || slices.Contains(symbols, s) {
			return "string" // values Avro cannot name: kept as text
		}
		symbols = append(symbols, s)
	}
	return map[string]any{"type": "enum", "name": b.name(name), "symbols": symbols}
}

// ref follows a local reference (#/$defs/x, #/definitions/x); one being followed already
// (a recursive type) is JSON text.
func (b *jsonAvro) ref(ref string) (any, error) {
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("$ref %s: only references inside the schema (#/...) are followed", ref)
	}
	if b.open[ref] {
		return "string", nil
	}
	var node any = b.root
	for _, p := range strings.Split(path, "/") {
		o, ok := node.(*jsonObject)
		if !ok {
			return nil, fmt.Errorf("$ref %s: not found", ref)
		}
		if node, ok = o.vals[strings.NewReplacer("~1", "/", "~0", "~").Replace(p)]; !ok {
			return nil, fmt.Errorf("$ref %s: not found", ref)
		}
	}
	b.open[ref] = true
	defer delete(b.open, ref)
	return b.schema(node, path[strings.LastIndex(path, "/")+1:])
}

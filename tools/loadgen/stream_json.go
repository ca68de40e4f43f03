package loadgen

// A JSON Schema stream's records: JSON objects with random values the schema accepts (each
// one checked with the validator the product's decoder compiles), framed in the Confluent
// wire format.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
)

// maxJSONDepth bounds how deep nested objects and arrays are filled.
const maxJSONDepth = 8

type jsonFormat struct {
	g         *StreamGenerator
	cfg       StreamConfig
	reg       avro.Registry
	root      map[string]any
	validator *jsonschema.Schema
	last      map[string]any // the last record made (tests compare what is read back with it)
}

func newJSONFormat(cfg StreamConfig, g *StreamGenerator, reg avro.Registry) (*jsonFormat, error) {
	v, _, err := avro.CompileJSONSchema(0, sr.Schema{Schema: cfg.Schema, Type: sr.TypeJSON})
	if err != nil {
		var de *avro.DecodeError
		if errors.As(err, &de) && de.Err != nil {
			err = de.Err
		}
		return nil, fmt.Errorf("schema: %w", err)
	}
	f := &jsonFormat{g: g, cfg: cfg, reg: reg, validator: v}
	dec := json.NewDecoder(strings.NewReader(cfg.Schema))
	dec.UseNumber()
	if err := dec.Decode(&f.root); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	var errs []error
	if cfg.KeyField != "" {
		if types, _ := f.types(f.at(cfg.KeyField)); !slices.Contains(types, "string") && !slices.Contains(types, "integer") {
			errs = append(errs, fmt.Errorf("key field %s is not a property of type string or integer", cfg.KeyField))
		}
	}
	if cfg.TimeField != "" {
		if n := f.at(cfg.TimeField); n == nil || n["format"] != "date-time" {
			errs = append(errs, fmt.Errorf("time field %s is not a property of type string with format date-time", cfg.TimeField))
		}
	}
	return f, errors.Join(errs...)
}

// at is the schema of the property at a dot path, or nil.
func (f *jsonFormat) at(path string) map[string]any {
	node := f.root
	for _, name := range strings.Split(path, ".") {
		props, _ := f.deref(node)["properties"].(map[string]any)
		next, _ := props[name].(map[string]any)
		if next == nil {
			return nil
		}
		node = next
	}
	return f.deref(node)
}

// deref follows a local $ref (#/...); one that leads nowhere is nil.
func (f *jsonFormat) deref(node map[string]any) map[string]any {
	for range maxJSONDepth {
		ref, ok := node["$ref"].(string)
		if !ok {
			return node
		}
		path, _ := strings.CutPrefix(ref, "#/")
		var cur any = f.root
		for _, p := range strings.Split(path, "/") {
			m, _ := cur.(map[string]any)
			cur = m[strings.NewReplacer("~1", "/", "~0", "~").Replace(p)]
		}
		if node, _ = cur.(map[string]any); node == nil {
			return nil
		}
	}
	return nil
}

// types is a node's types besides null, and whether null is one.
func (f *jsonFormat) types(node map[string]any) ([]string, bool) {
	switch t := node["type"].(type) {
	case string:
		return []string{t}, t == "null"
	case []any:
		var out []string
		null := false
		for _, e := range t {
			if s, _ := e.(string); s == "null" {
				null = true
			} else if s != "" {
				out = append(out, s)
			}
		}
		return out, null
	}
	return nil, false
}

func (f *jsonFormat) register(ctx context.Context) (int, error) {
	return avro.RegisterSchema(ctx, f.reg, f.cfg.Subject, sr.Schema{Schema: f.cfg.Schema, Type: sr.TypeJSON})
}

func (f *jsonFormat) record(_ context.Context, id, n int) ([]byte, string, error) {
	v, _ := f.value(f.root, 0).(map[string]any)
	if v == nil {
		return nil, "", errors.New("loadgen: the JSON Schema's root is not an object")
	}
	key := f.g.key(n)
	if f.cfg.KeyField != "" {
		if types, _ := f.types(f.at(f.cfg.KeyField)); slices.Contains(types, "string") {
			setJSONPath(v, f.cfg.KeyField, key)
		} else {
			key = fmt.Sprint(n)
			setJSONPath(v, f.cfg.KeyField, n)
		}
	}
	if f.cfg.TimeField != "" {
		setJSONPath(v, f.cfg.TimeField, f.g.eventTime(n).Format(time.RFC3339Nano))
	}
	f.last = v
	body, err := json.Marshal(v)
	if err != nil {
		return nil, "", fmt.Errorf("loadgen: record %d: %w", n, err)
	}
	if err := f.validate(body); err != nil {
		return nil, "", fmt.Errorf("loadgen: record %d: the JSON Schema rejects the values loadgen made (%s); its constraints are more than loadgen knows: %w", n, body, err)
	}
	return append(avro.AppendFrame(nil, id), body...), key, nil
}

func (f *jsonFormat) validate(body []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return err
	}
	return f.validator.Validate(doc)
}

// setJSONPath sets the property at path, making the objects on the way.
func setJSONPath(v map[string]any, path string, x any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, _ := v[p].(map[string]any)
		if next == nil {
			next = map[string]any{}
			v[p] = next
		}
		v = next
	}
	v[parts[len(parts)-1]] = x
}

// value is a random value node accepts: one of its enum, or of one of its types (null one
// time in four where allowed). An object has every required property and each other one two
// times in three; a node that says nothing of its type is a string.
func (f *jsonFormat) value(node map[string]any, depth int) any {
	g := f.g
	if node = f.deref(node); node == nil {
		return nil
	}
	if c, ok := node["const"]; ok {
		return c
	}
	if list, ok := node["enum"].([]any); ok && len(list) > 0 {
		return list[g.rng.IntN(len(list))]
	}
	for _, comb := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := node[comb].([]any); ok && len(alts) > 0 {
			alt, _ := alts[0].(map[string]any)
			return f.value(alt, depth+1)
		}
	}
	types, null := f.types(node)
	if null && (len(types) == 0 || g.rng.IntN(4) == 0) {
		return nil
	}
	t := "string"
	if len(types) > 0 {
		t = types[g.rng.IntN(len(types))]
	}
	switch t {
	case "object":
		return f.object(node, depth)
	case "array":
		items, _ := node["items"].(map[string]any)
		out := []any{}
		for range g.rng.IntN(4) {
			if depth >= maxJSONDepth {
				break
			}
			out = append(out, f.value(items, depth+1))
		}
		return out
	case "integer":
		lo, hi := bound(node, "minimum", 0), bound(node, "maximum", 10000)
		return lo + g.rng.Int64N(max(hi-lo, 0)+1)
	case "number":
		lo := bound(node, "minimum", 0)
		return float64(lo) + float64(g.rng.IntN(100000))/16
	case "boolean":
		return g.rng.IntN(2) == 1
	}
	switch node["format"] {
	case "date-time":
		return g.cfg.EventStart.Add(-time.Duration(g.rng.IntN(3600_000_000)) * time.Microsecond).Format(time.RFC3339Nano)
	case "date":
		return g.cfg.EventStart.Format(time.DateOnly)
	case "uuid":
		return nameUUID(fmt.Sprint(g.rng.Uint64()))
	}
	return g.text()
}

func (f *jsonFormat) object(node map[string]any, depth int) map[string]any {
	g := f.g
	out := map[string]any{}
	props, _ := node["properties"].(map[string]any)
	var required []string
	if list, ok := node["required"].([]any); ok {
		for _, r := range list {
			if s, ok := r.(string); ok {
				required = append(required, s)
			}
		}
	}
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names) // the same draws in the same order: reproducible
	for _, k := range names {
		if !slices.Contains(required, k) && (depth >= maxJSONDepth || g.rng.IntN(3) == 0) {
			continue
		}
		p, _ := props[k].(map[string]any)
		out[k] = f.value(p, depth+1)
	}
	if len(props) == 0 && depth < maxJSONDepth {
		if ap, ok := node["additionalProperties"].(map[string]any); ok {
			for range g.rng.IntN(4) {
				out[vocabulary[g.rng.IntN(len(vocabulary))]] = f.value(ap, depth+1)
			}
		} else if node["additionalProperties"] != false {
			for range g.rng.IntN(3) {
				out[vocabulary[g.rng.IntN(len(vocabulary))]] = g.text()
			}
		}
	}
	return out
}

// bound is node's integer keyword name, or def.
func bound(node map[string]any, name string, def int64) int64 {
	if n, ok := node[name].(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			return i
		}
		if x, err := n.Float64(); err == nil {
			return int64(x)
		}
	}
	return def
}

// truncate cuts a value's JSON text in half: it no longer parses.
func (f *jsonFormat) truncate(valid []byte) []byte {
	return valid[:avro.HeaderSize+(len(valid)-avro.HeaderSize)/2]
}

// reject is the value with one property given a value of a type its schema does not take:
// the first of the root's properties (in name order) for which a wrong value is rejected. A schema that takes all of them gets an array, where the root is an object.
func (f *jsonFormat) reject(valid []byte) []byte {
	var v map[string]any
	d := json.NewDecoder(bytes.NewReader(valid[avro.HeaderSize:]))
	d.UseNumber()
	if err := d.Decode(&v); err == nil {
		props, _ := f.root["properties"].(map[string]any)
		names := make([]string, 0, len(props))
		for k := range props {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			for _, wrong := range []any{12345, "not a value of this type", true, []any{}, map[string]any{}} {
				saved, had := v[k]
				v[k] = wrong
				if body, err := json.Marshal(v); err == nil && f.validate(body) != nil {
					return append(valid[:avro.HeaderSize:avro.HeaderSize], body...)
				}
				if v[k] = saved; !had {
					delete(v, k)
				}
			}
		}
	}
	return append(valid[:avro.HeaderSize:avro.HeaderSize], "[]"...)
}

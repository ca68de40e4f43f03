package chschema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// RowValues are the values of a derived table's columns for one record, as hamba/avro decodes
// it into an any (a map per record; a nullable union's value or nil; a union of several types
// as its value), in the Go types clickhouse-go appends for each column type. A value a column
// cannot take is an error naming the column: the record's own fault, to be dead-lettered.
func RowValues(cols []Column, rec map[string]any) ([]any, error) {
	out := make([]any, len(cols))
	for i, c := range cols {
		v, err := columnValue(c, rec)
		if err != nil {
			return nil, fmt.Errorf("column %s (field %s): %w", c.Name, c.Field, err)
		}
		out[i] = v
	}
	return out, nil
}

func columnValue(c Column, rec map[string]any) (any, error) {
	raw := lookup(rec, strings.Split(c.Field, "."), c.Branches)
	if c.JSON {
		return jsonText(raw, c.Type)
	}
	if c.MapPart != "" {
		raw = mapPart(raw, c.MapPart == MapKeys)
	}
	return convert(raw, c.Type)
}

// lookup follows path through records; through an array it maps over the elements, so that a
// field of an array of records is the array of that field. branches (Column.Branches) name the
// unions whose value hamba/avro keys by its type's name.
func lookup(v any, path, branches []string) any {
	if len(path) == 0 {
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		next := x[path[0]]
		if len(branches) > 0 && branches[0] != "" {
			next = unbranch(next, branches[0])
		}
		var rest []string
		if len(branches) > 0 {
			rest = branches[1:]
		}
		return lookup(next, path[1:], rest)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = lookup(e, path, branches)
		}
		return out
	}
	return nil // an absent optional record: every field under it is null
}

// unbranch is a union's value without the map hamba/avro keys it in by its type's name (each
// element's, for an array of such unions).
func unbranch(v any, name string) any {
	switch x := v.(type) {
	case map[string]any:
		if inner, ok := x[name]; ok && len(x) == 1 {
			return inner
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = unbranch(e, name)
		}
		return out
	}
	return v
}

// mapPart is a map's keys, sorted, or its values in the order of its sorted keys; for maps in
// an array (a field of an array of records), the array of them. null is the empty map.
func mapPart(v any, keys bool) any {
	if list, ok := v.([]any); ok {
		out := make([]any, len(list))
		for i, e := range list {
			out[i] = mapPart(e, keys)
		}
		return out
	}
	m, _ := v.(map[string]any)
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	out := make([]any, len(ks))
	for i, k := range ks {
		if keys {
			out[i] = k
		} else {
			out[i] = m[k]
		}
	}
	return out
}

func jsonText(v any, typ string) (any, error) {
	if inner, ok := strings.CutPrefix(typ, "Array("); ok {
		list, _ := v.([]any)
		out := make([]string, len(list))
		for i, e := range list {
			s, err := jsonText(e, strings.TrimSuffix(inner, ")"))
			if err != nil {
				return nil, err
			}
			out[i] = s.(string)
		}
		return out, nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// convert turns a decoded value into what clickhouse-go appends to a column of type typ.
func convert(v any, typ string) (any, error) {
	rv, err := convertTo(v, typ)
	if err != nil {
		return nil, err
	}
	return rv.Interface(), nil
}

func convertTo(v any, typ string) (reflect.Value, error) {
	if inner, ok := unwrap(typ, "Array"); ok {
		et, err := goType(inner)
		if err != nil {
			return reflect.Value{}, err
		}
		list, _ := v.([]any) // null (an absent optional array) is the empty array
		out := reflect.MakeSlice(reflect.SliceOf(et), 0, len(list))
		for _, e := range list {
			ev, err := convertTo(e, inner)
			if err != nil {
				return reflect.Value{}, err
			}
			out = reflect.Append(out, ev)
		}
		return out, nil
	}
	if inner, ok := unwrap(typ, "Nullable"); ok {
		et, err := goType(inner)
		if err != nil {
			return reflect.Value{}, err
		}
		if v == nil {
			return reflect.Zero(reflect.PointerTo(et)), nil
		}
		ev, err := convertTo(v, inner)
		if err != nil {
			return reflect.Value{}, err
		}
		p := reflect.New(et)
		p.Elem().Set(ev)
		return p, nil
	}
	s, err := scalarValue(v, typ)
	if err != nil {
		return reflect.Value{}, err
	}
	return reflect.ValueOf(s), nil
}

// unwrap is the inner type of a wrapper type such as Array(...).
func unwrap(typ, wrapper string) (string, bool) {
	inner, ok := strings.CutPrefix(typ, wrapper+"(")
	if !ok {
		return "", false
	}
	return strings.TrimSuffix(inner, ")"), true
}

// goType is the Go type clickhouse-go appends for a column type.
func goType(typ string) (reflect.Type, error) {
	if inner, ok := unwrap(typ, "Array"); ok {
		et, err := goType(inner)
		return reflect.SliceOf(et), err
	}
	if inner, ok := unwrap(typ, "Nullable"); ok {
		et, err := goType(inner)
		return reflect.PointerTo(et), err
	}
	switch {
	case typ == "String" || typ == "UUID" || strings.HasPrefix(typ, "Enum") || strings.HasPrefix(typ, "FixedString"):
		return reflect.TypeFor[string](), nil
	case typ == "UInt8":
		return reflect.TypeFor[uint8](), nil
	case typ == "Int32":
		return reflect.TypeFor[int32](), nil
	case typ == "Int64":
		return reflect.TypeFor[int64](), nil
	case typ == "UInt64":
		return reflect.TypeFor[uint64](), nil
	case typ == "Float32":
		return reflect.TypeFor[float32](), nil
	case typ == "Float64":
		return reflect.TypeFor[float64](), nil
	case typ == "Date" || strings.HasPrefix(typ, "DateTime"):
		return reflect.TypeFor[time.Time](), nil
	case strings.HasPrefix(typ, "Decimal"):
		return reflect.TypeFor[decimal.Decimal](), nil
	}
	return nil, fmt.Errorf("no Go type for column type %s", typ)
}

func scalarValue(v any, typ string) (any, error) {
	bad := func() (any, error) { return nil, fmt.Errorf("%T %v does not fit %s", v, v, typ) }
	switch {
	case typ == "String" || typ == "UUID" || strings.HasPrefix(typ, "Enum"):
		switch x := v.(type) {
		case string:
			return x, nil
		case []byte:
			return string(x), nil
		}
	case strings.HasPrefix(typ, "FixedString"):
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Array && rv.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, rv.Len())
			reflect.Copy(reflect.ValueOf(b), rv)
			return string(b), nil
		}
	case typ == "UInt8":
		if b, ok := v.(bool); ok {
			if b {
				return uint8(1), nil
			}
			return uint8(0), nil
		}
	case typ == "Int32" || typ == "Int64" || typ == "UInt64":
		n, ok := toInt64(v)
		if !ok {
			return bad()
		}
		switch typ {
		case "Int32":
			return int32(n), nil
		case "UInt64":
			return uint64(n), nil
		}
		return n, nil
	case typ == "Float32" || typ == "Float64":
		var f float64
		switch x := v.(type) {
		case float32:
			f = float64(x)
		case float64:
			f = x
		default:
			return bad()
		}
		if typ == "Float32" {
			return float32(f), nil
		}
		return f, nil
	case typ == "Date" || strings.HasPrefix(typ, "DateTime"):
		if t, ok := v.(time.Time); ok {
			return t, nil
		}
	case strings.HasPrefix(typ, "Decimal"):
		if r, ok := v.(*big.Rat); ok {
			_, scale, _ := strings.Cut(strings.TrimSuffix(typ, ")"), ", ")
			s, _ := strconv.Atoi(scale)
			return decimal.NewFromBigRat(r, int32(s)), nil
		}
	}
	return bad()
}

func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// RecastValue is v, a value convert made for a column of an older type, as a column of type
// typ takes it: the type changes PlanEvolution follows (Int32 to Int64, Float32 to Float64, T
// to Nullable(T), inside arrays too; an enum's value is its name either way).
func RecastValue(v any, typ string) (any, error) {
	t, err := goType(typ)
	if err != nil {
		return nil, err
	}
	rv, err := recastTo(reflect.ValueOf(v), t)
	if err != nil {
		return nil, fmt.Errorf("%T %v does not fit %s: %w", v, v, typ, err)
	}
	return rv.Interface(), nil
}

func recastTo(v reflect.Value, t reflect.Type) (reflect.Value, error) {
	switch {
	case !v.IsValid():
		return reflect.Zero(t), nil
	case v.Type() == t:
		return v, nil
	case v.Kind() == reflect.Slice && t.Kind() == reflect.Slice:
		out := reflect.MakeSlice(t, v.Len(), v.Len())
		for i := range v.Len() {
			e, err := recastTo(v.Index(i), t.Elem())
			if err != nil {
				return reflect.Value{}, err
			}
			out.Index(i).Set(e)
		}
		return out, nil
	case v.Kind() == reflect.Pointer && t.Kind() == reflect.Pointer:
		if v.IsNil() {
			return reflect.Zero(t), nil
		}
		return recastTo(v.Elem(), t)
	case t.Kind() == reflect.Pointer:
		e, err := recastTo(v, t.Elem())
		if err != nil {
			return reflect.Value{}, err
		}
		p := reflect.New(t.Elem())
		p.Elem().Set(e)
		return p, nil
	case numeric(v.Kind()) && numeric(t.Kind()):
		return v.Convert(t), nil
	}
	return reflect.Value{}, fmt.Errorf("no conversion from %s to %s", v.Type(), t)
}

func numeric(k reflect.Kind) bool {
	return k >= reflect.Int && k <= reflect.Float64
}

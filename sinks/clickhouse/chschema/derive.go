package chschema

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"
)

// A table derived from an Avro schema: the columns a declared stream's records land in. The
// mapping (docs/streams.md has the table):
//
//   - nested records are flattened, their field names joined with "_" (user.id is user_id);
//   - ["null", T] is Nullable(T), or, for a T ClickHouse cannot make Nullable (an array, a map,
//     a record), T itself with its empty value for null; a union of two or more other types is
//     a String holding the value as JSON;
//   - an array is Array(T); an array of records is one Array column per leaf field (parallel
//     arrays, as ClickHouse's Nested type stores them); a map is two parallel arrays,
//     NAME_keys Array(String) and NAME_values Array(T);
//   - enums are Enum8 (Enum16 past 127 symbols), fixed is FixedString(N);
//   - logical types map to what the server has (Capabilities): timestamps are DateTime64(3|6)
//     where the server has it and DateTime (seconds) on 18.16; date is Date, uuid is UUID,
//     decimal(P, S) is Decimal(P, S).

// Column is one column of a derived table.
type Column struct {
	Name string // the flattened field path: user_id, items_price, tags_keys
	Type string // the ClickHouse type: Nullable(String), Array(Float64), ...
	// Field is the Avro field path the column reads, dot-joined (user.id); a map's two columns
	// both read the map field.
	Field string
	// JSON marks a column that holds its value as JSON text (a union of several types).
	JSON bool
	// HasDefault says whether the Avro field (or an enclosing one) has a default: a column
	// added by a newer schema needs one, so that older records have a value for it.
	HasDefault bool
	// MapPart is MapKeys or MapValues for the two columns of a map field, else "".
	MapPart string
	// Branches has, for each part of Field, the full name of the named type (record, enum,
	// fixed) a nullable union there holds, "array" or "map" for an array or a map, or "":
	// decoded into an any, hamba/avro keys such a union's value by that name. Nil when there
	// is none.
	Branches []string
}

// The two columns of a map field: its sorted keys, and the values in the keys' order.
const (
	MapKeys   = "keys"
	MapValues = "values"
)

// ErrUnsupportedField is what DeriveColumns returns (errors.Is) for a field no column can hold;
// the error names the field. Exclude the field or change its type.
var ErrUnsupportedField = errors.New("clickhouse: field has no column type")

// DeriveColumns maps an Avro record schema to the columns of a table, in field order. A name
// that two fields flatten to (a_b and a.b) is an error naming both.
func DeriveColumns(s avro.Schema, caps Capabilities) ([]Column, error) {
	rec, ok := deref(s).(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("%w: the schema is a %s, not a record", ErrUnsupportedField, s.Type())
	}
	d := deriver{caps: caps, seen: map[string]string{}}
	if err := d.record(rec, "", "", nil, 0, false); err != nil {
		return nil, err
	}
	return d.cols, nil
}

type deriver struct {
	caps Capabilities
	cols []Column
	seen map[string]string // column name → the field that made it
}

// record adds the columns of rec's fields under prefix (column) and path (field), each inside
// arrays enclosing arrays, nullable when nullable (an optional enclosing record).
func (d *deriver) record(rec *avro.RecordSchema, prefix, path string, br []string, arrays int, nullable bool) error {
	for _, f := range rec.Fields() {
		name, field := join(prefix, f.Name(), "_"), join(path, f.Name(), ".")
		if err := d.field(f.Type(), name, field, append(slices.Clone(br), ""), arrays, nullable, f.HasDefault()); err != nil {
			return err
		}
	}
	return nil
}

func (d *deriver) field(s avro.Schema, name, field string, br []string, arrays int, nullable, hasDefault bool) error {
	s = deref(s)
	switch t := s.(type) {
	case *avro.RecordSchema:
		n := len(d.cols)
		if err := d.record(t, name, field, br, arrays, nullable); err != nil {
			return err
		}
		for i := n; i < len(d.cols); i++ {
			d.cols[i].HasDefault = d.cols[i].HasDefault || hasDefault
		}
		return nil
	case *avro.UnionSchema:
		var others []avro.Schema
		hasNull := false
		for _, u := range t.Types() {
			if u.Type() == avro.Null {
				hasNull = true
			} else {
				others = append(others, u)
			}
		}
		switch {
		case len(others) == 1:
			// hamba keys the value of a union of a named type by its name, and of an array or
			// a map by "array" or "map" (a primitive's value is bare).
			branch := ""
			switch x := deref(others[0]).(type) {
			case avro.NamedSchema:
				branch = x.FullName()
			case *avro.ArraySchema, *avro.MapSchema:
				branch = string(x.Type())
			}
			if branch != "" {
				br = slices.Clone(br)
				br[len(br)-1] = branch
			}
			return d.field(others[0], name, field, br, arrays, nullable || hasNull, hasDefault)
		case len(others) == 0:
			return fmt.Errorf("%w: %s is always null", ErrUnsupportedField, field)
		}
		return d.add(Column{Name: name, Type: wrap("String", arrays, false), Field: field, JSON: true, HasDefault: hasDefault}, br)
	case *avro.ArraySchema:
		return d.field(t.Items(), name, field, br, arrays+1, false, hasDefault)
	case *avro.MapSchema:
		if err := d.add(Column{Name: name + "_keys", Type: wrap("String", arrays+1, false), Field: field, MapPart: MapKeys, HasDefault: hasDefault}, br); err != nil {
			return err
		}
		if _, ok := deref(t.Values()).(*avro.RecordSchema); ok {
			return fmt.Errorf("%w: %s is a map of records; exclude it, or make it an array of records", ErrUnsupportedField, field)
		}
		n := len(d.cols)
		if err := d.field(t.Values(), name+"_values", field, br, arrays+1, false, hasDefault); err != nil {
			return err
		}
		if len(d.cols) != n+1 {
			return fmt.Errorf("%w: the values of the map %s are not one column (a map of maps?); exclude it", ErrUnsupportedField, field)
		}
		d.cols[n].MapPart = MapValues
		return nil
	}
	typ, err := d.scalar(s, field)
	if err != nil {
		return err
	}
	return d.add(Column{Name: name, Type: wrap(typ, arrays, nullable), Field: field, HasDefault: hasDefault}, br)
}

// scalar is the ClickHouse type of a primitive, enum or fixed schema.
func (d *deriver) scalar(s avro.Schema, field string) (string, error) {
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		if t, ok := d.logical(s, ls.Logical()); ok {
			return t, nil
		}
	}
	switch t := s.(type) {
	case *avro.EnumSchema:
		values := make([]enumValue, len(t.Symbols()))
		for i, sym := range t.Symbols() {
			values[i] = enumValue{sym, i + 1}
		}
		return enumType(values), nil
	case *avro.FixedSchema:
		return "FixedString(" + strconv.Itoa(t.Size()) + ")", nil
	}
	switch s.Type() {
	case avro.Boolean:
		return "UInt8", nil
	case avro.Int:
		return "Int32", nil
	case avro.Long:
		return "Int64", nil
	case avro.Float:
		return "Float32", nil
	case avro.Double:
		return "Float64", nil
	case avro.String, avro.Bytes:
		return "String", nil
	}
	return "", fmt.Errorf("%w: %s is of type %s", ErrUnsupportedField, field, s.Type())
}

// logical is the type of a logical type the server can hold; false leaves the underlying type.
func (d *deriver) logical(s avro.Schema, l avro.LogicalSchema) (string, bool) {
	ts := func(digits string) string {
		if d.caps.DateTime64 {
			return "DateTime64(" + digits + ")"
		}
		return "DateTime" // seconds: 18.16 has nothing finer
	}
	switch l.Type() {
	case avro.TimestampMillis, avro.LocalTimestampMillis:
		return ts("3"), true
	case avro.TimestampMicros, avro.LocalTimestampMicros:
		return ts("6"), true
	case avro.Date:
		return "Date", true
	case avro.UUID:
		return "UUID", s.Type() == avro.String
	case avro.Decimal:
		if dl, ok := l.(*avro.DecimalLogicalSchema); ok && dl.Precision() <= 38 {
			return fmt.Sprintf("Decimal(%d, %d)", dl.Precision(), dl.Scale()), true
		}
	}
	return "", false
}

func (d *deriver) add(c Column, br []string) error {
	if slices.ContainsFunc(br, func(b string) bool { return b != "" }) {
		c.Branches = slices.Clone(br)
	}
	if prev, dup := d.seen[c.Name]; dup {
		return fmt.Errorf("%w: %s and %s both flatten to the column %s; rename one", ErrUnsupportedField, prev, c.Field, c.Name)
	}
	d.seen[c.Name] = c.Field
	d.cols = append(d.cols, c)
	return nil
}

// wrap puts t in arrays Array()s, nullable inside them: ClickHouse has Array(Nullable(T)), not
// Nullable(Array(T)).
func wrap(t string, arrays int, nullable bool) string {
	if nullable {
		t = "Nullable(" + t + ")"
	}
	for range arrays {
		t = "Array(" + t + ")"
	}
	return t
}

func deref(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

func join(a, b, sep string) string {
	if a == "" {
		return b
	}
	return a + sep + b
}

// quote is a ClickHouse string literal.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

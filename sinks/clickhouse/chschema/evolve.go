package chschema

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A derived table's DDL and its evolution: the CREATE TABLE of a TableSpec, and what following
// a newer schema takes (PlanEvolution), or why it cannot (*IncompatibleError).

// IncompatibleError is a newer schema's change a derived table cannot follow: a column whose
// type changed in a way no ALTER keeps its rows for (a narrowing, int to string, a field no
// longer optional), or a field added without a default. Its stream stops with it;
// its records are neither dropped nor dead-lettered.
type IncompatibleError struct {
	Field, Column string
	Was, Now      string // the column's types; Was "" for a field added without a default
	Why           string // why the type cannot be followed; "" when they are merely different
}

func (e *IncompatibleError) Error() string {
	if e.Was == "" {
		return fmt.Sprintf("clickhouse: field %s was added without a default: rows already written have no value for column %s", e.Field, e.Column)
	}
	msg := fmt.Sprintf("clickhouse: field %s changed type: column %s is %s, the schema now makes it %s", e.Field, e.Column, e.Was, e.Now)
	if e.Why != "" {
		msg += ": " + e.Why
	}
	return msg
}

// PlanEvolution is what following a newer schema takes: the ALTER TABLE statements, in the
// newer columns' order, that add the columns it adds (each from a field with a default) and
// modify the columns whose type it changes in a way ClickHouse converts with the rows kept
// (followType: an enum's new symbols, int to long, float to double, a field becoming
// optional, also inside arrays). A column the newer schema no longer has stays (older rows
// keep their values, newer ones get its default). keys are the table's sorting-key columns:
// ClickHouse changes their type only to add enum values. Any other changed type, or a field
// added without a default, is an *IncompatibleError.
func PlanEvolution(table string, was, now []Column, keys ...string) ([]string, error) {
	stmts, _, err := Evolve(table, was, now, keys)
	return stmts, err
}

// Evolve is PlanEvolution's statements and the columns the table has after them: was, with
// the modified types, then the added columns.
func Evolve(table string, was, now []Column, keys []string) ([]string, []Column, error) {
	next := slices.Clone(was)
	at := map[string]int{}
	for i, c := range was {
		at[c.Name] = i
	}
	var stmts []string
	for _, c := range now {
		i, ok := at[c.Name]
		switch {
		case ok && next[i].Type == c.Type:
		case ok:
			typ, why := followType(next[i].Type, c.Type)
			if why == "" && typ != next[i].Type && slices.Contains(keys, c.Name) && !enumOnly(next[i].Type, typ) {
				why = "it is in the table's sorting key, whose types ClickHouse changes only to add enum values"
			}
			if why != "" {
				return nil, nil, &IncompatibleError{Field: c.Field, Column: c.Name, Was: next[i].Type, Now: c.Type, Why: why}
			}
			if typ != next[i].Type {
				stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s MODIFY COLUMN %s %s", table, QuoteIdent(c.Name), typ))
				next[i].Type = typ
			}
		case !c.HasDefault:
			return nil, nil, &IncompatibleError{Field: c.Field, Column: c.Name}
		default:
			stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", table, QuoteIdent(c.Name), c.Type))
			next = append(next, c)
		}
	}
	return stmts, next, nil
}

// promotions are the column type changes of Avro's promotions (int to long, float or double;
// long to float or double; float to double) that ALTER TABLE ... MODIFY COLUMN converts, the
// rows kept. string and bytes are both String.
var promotions = map[string][]string{
	"Int32":   {"Int64", "Float32", "Float64"},
	"Int64":   {"Float32", "Float64"},
	"Float32": {"Float64"},
}

// followType is the type a column of type was is modified to so that it holds what a newer
// schema derives as now, or why no type can (was stays, and the stream stops):
//   - an enum: the column keeps every value it has, with its number, and gains the symbols it
//     lacks, numbered after the highest (Enum8 becomes Enum16 past 127); symbols removed or
//     moved in the newer schema change nothing (the values are inserted by name);
//   - a promotion (promotions): now;
//   - T becoming Nullable(T) (a field made optional);
//   - the same inside Array and Nullable.
func followType(was, now string) (string, string) {
	if was == now {
		return was, ""
	}
	for _, w := range []string{"Array", "Nullable"} {
		wi, wok := unwrap(was, w)
		ni, nok := unwrap(now, w)
		switch {
		case wok && nok:
			typ, why := followType(wi, ni)
			return w + "(" + typ + ")", why
		case w == "Nullable" && nok:
			typ, why := followType(was, ni)
			return "Nullable(" + typ + ")", why
		case w == "Nullable" && wok:
			return was, "the field is no longer optional, and rows hold nulls"
		case wok || nok:
			return was, "an array and a single value are not one column"
		}
	}
	if slices.Contains(promotions[was], now) {
		return now, ""
	}
	old, okw := parseEnum(was)
	add, okn := parseEnum(now)
	if !okw || !okn {
		return was, "a column follows only new enum symbols, int to long, float or double, long to float or double, float to double, and a field made optional"
	}
	// The values are inserted by name, so a symbol's number is the column's own: old names keep
	// theirs whatever their place in the newer schema, a removed one stays (rows hold it; the
	// newer schema's readers give its default instead), and only names the column lacks are
	// added, numbered after the highest.
	top, have := 0, map[string]bool{}
	for _, v := range old {
		top = max(top, v.num)
		have[v.name] = true
	}
	for _, v := range add {
		if !have[v.name] {
			top++
			old = append(old, enumValue{v.name, top})
		}
	}
	if top > math.MaxInt16 {
		return was, fmt.Sprintf("an enum holds at most %d symbols", math.MaxInt16)
	}
	return enumType(old), ""
}

// enumOnly reports whether was and now differ in their enum values only: the same wrappers
// and the same width.
func enumOnly(was, now string) bool {
	i, j := strings.Index(was, "Enum"), strings.Index(now, "Enum")
	return i >= 0 && i == j && was[:i] == now[:j] && strings.HasPrefix(was[i:], "Enum8(") == strings.HasPrefix(now[j:], "Enum8(")
}

// enumValue is one value of an Enum8 or Enum16 type.
type enumValue struct {
	name string
	num  int
}

var enumPair = regexp.MustCompile(`^\s*'((?:[^'\\]|\\.)*)'\s*=\s*(-?\d+)\s*(?:,|$)`)

// parseEnum is the values of an Enum8(...) or Enum16(...) type as system.columns writes it and
// scalar derives it, in order; false for another type.
func parseEnum(typ string) ([]enumValue, bool) {
	body, ok := unwrap(typ, "Enum8")
	if !ok {
		if body, ok = unwrap(typ, "Enum16"); !ok {
			return nil, false
		}
	}
	var out []enumValue
	for body != "" {
		m := enumPair.FindStringSubmatch(body)
		if m == nil {
			return nil, false
		}
		n, err := strconv.Atoi(m[2])
		if err != nil {
			return nil, false
		}
		out = append(out, enumValue{strings.NewReplacer(`\\`, `\`, `\'`, `'`).Replace(m[1]), n})
		body = body[len(m[0]):]
	}
	return out, len(out) > 0
}

// enumType is the Enum8 type of values, or Enum16 if a number is outside Enum8's range.
func enumType(values []enumValue) string {
	width := "Enum8"
	parts := make([]string, len(values))
	for i, v := range values {
		if v.num > math.MaxInt8 || v.num < math.MinInt8 {
			width = "Enum16"
		}
		parts[i] = quote(v.name) + " = " + strconv.Itoa(v.num)
	}
	return width + "(" + strings.Join(parts, ", ") + ")"
}

// TableSpec is a derived table: its columns and how it collapses.
type TableSpec struct {
	Name    string
	Columns []Column
	// OrderBy are the columns that identify a row (the stream's dedupe key); rows with equal
	// ones collapse to the one with the highest Version.
	OrderBy []string
	// Version is the column ReplacingMergeTree keeps the highest of (e.g. the offset).
	Version string
	// PartitionBy is the partition expression, e.g. toYYYYMMDD(event_time); "" for none.
	PartitionBy string
	// TimeKey, if set, leads the sorting key: the minute of the event time, so a query with a
	// time filter reads only its minutes (docs/dashboards.md). A row's event time never
	// changes, so its copies still meet.
	TimeKey string
}

// orderBy is the table's ORDER BY expression: (TimeKey, OrderBy...).
func (t TableSpec) orderBy() string {
	var order []string
	if t.TimeKey != "" {
		order = append(order, t.TimeKey)
	}
	for _, o := range t.OrderBy {
		order = append(order, QuoteIdent(o))
	}
	return "(" + strings.Join(order, ", ") + ")"
}

// CreateDDL is the statement that creates the table, on 18.16 and current servers alike.
func (t TableSpec) CreateDDL() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (\n", t.Name)
	for i, c := range t.Columns {
		sep := ","
		if i == len(t.Columns)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    %s %s%s\n", QuoteIdent(c.Name), c.Type, sep)
	}
	fmt.Fprintf(&b, ") ENGINE = ReplacingMergeTree(%s)\n", QuoteIdent(t.Version))
	if t.PartitionBy != "" {
		fmt.Fprintf(&b, "PARTITION BY %s\n", t.PartitionBy)
	}
	fmt.Fprintf(&b, "ORDER BY %s", t.orderBy())
	return b.String()
}

// RebuildDDL is the statement that gives an existing table of the spec its partitions and
// sorting key (REBUILD TABLE, rebuild.go); "" when the spec has no time key.
func (t TableSpec) RebuildDDL() string {
	if t.TimeKey == "" {
		return ""
	}
	return fmt.Sprintf("REBUILD TABLE %s PARTITION BY %s ORDER BY %s", t.Name, t.PartitionBy, t.orderBy())
}

package chschema

// The rebuild's plan: the chunks a table's rows are copied in, each a range of the old key
// inside one old partition, so that a chunk reads only its own granules.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// chunk is one planned copy: the rows of one old partition in one range of the old key.
type chunk struct {
	N     uint32
	Where string
	Rows  uint64
}

// plan splits the table's rows into chunks: one per old partition, or, for a partition of
// more than ChunkRows rows, ranges of the first two columns of the old key, found from a
// sample of about 10,000 keys (one pass over those two columns).
func (t rebuildTarget) plan(ctx context.Context, rb Rebuild) ([]chunk, error) {
	ti, err := t.info(ctx, t.local(rb.Table))
	if err != nil {
		return nil, err
	}
	parts, err := t.partitions(ctx, rb.Table, ti.partitionKey)
	if err != nil {
		return nil, err
	}
	keys, err := t.keyColumns(ctx, t.local(rb.Table), ti.sortingKey)
	if err != nil {
		return nil, err
	}
	var out []chunk
	for _, p := range parts {
		inPart := "1"
		if ti.partitionKey != "" {
			inPart = fmt.Sprintf("%s = %s", ti.partitionKey, p.literal)
		}
		if p.rows <= rb.chunkRows() || len(keys) == 0 {
			out = append(out, chunk{N: uint32(len(out)), Where: inPart, Rows: p.rows})
			continue
		}
		bounds, err := t.bounds(ctx, rb, inPart, keys, p.rows)
		if err != nil {
			return nil, err
		}
		for i := 0; i <= len(bounds); i++ {
			where := inPart
			if i > 0 {
				where += " AND NOT " + bounds[i-1]
			}
			if i < len(bounds) {
				where += " AND " + bounds[i]
			}
			var n uint64
			if err := t.conn.QueryRow(ctx, "SELECT toUInt64(count()) FROM "+t.q(rb.Table)+" WHERE "+where).Scan(&n); err != nil {
				return nil, fmt.Errorf("rebuild %s: count a chunk: %w", rb.Table, err)
			}
			out = append(out, chunk{N: uint32(len(out)), Where: where, Rows: n})
		}
	}
	return out, nil
}

type partition struct {
	literal string
	rows    uint64
}

// partitions lists the table's partitions (their key values as SQL literals) with their rows:
// from system.parts on one server; in cluster mode, where one server holds one shard's parts,
// by counting through the Distributed table.
func (t rebuildTarget) partitions(ctx context.Context, table, key string) ([]partition, error) {
	q := "SELECT partition, toUInt64(sum(rows)) FROM system.parts WHERE database = currentDatabase() AND table = '" + table + "' AND active GROUP BY partition ORDER BY partition"
	if t.cluster != "" {
		q = "SELECT toString(" + key + ") AS p, count() FROM " + t.q(table) + " GROUP BY p ORDER BY p"
		if key == "" {
			q = "SELECT 'tuple()', count() FROM " + t.q(table)
		}
	}
	rows, err := t.conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", table, err)
	}
	defer rows.Close()
	var out []partition
	for rows.Next() {
		var p partition
		if err := rows.Scan(&p.literal, &p.rows); err != nil {
			return nil, err
		}
		if _, err := strconv.ParseInt(p.literal, 10, 64); err != nil && !strings.HasPrefix(p.literal, "'") && p.literal != "tuple()" {
			p.literal = sqlString(p.literal)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// keyColumn is a column of the old sorting key, and whether its values are written quoted.
type keyColumn struct {
	name   string
	quoted bool
}

// keyColumns returns the first two columns of the sorting key sortingKey of table (fewer if
// the key has fewer plain columns).
func (t rebuildTarget) keyColumns(ctx context.Context, table, sortingKey string) ([]keyColumn, error) {
	var out []keyColumn
	for _, k := range strings.Split(sortingKey, ",") {
		k = strings.TrimSpace(k)
		if len(out) == 2 || k == "" {
			break
		}
		var typ string
		err := t.conn.QueryRow(ctx, "SELECT type FROM system.columns WHERE database = currentDatabase() AND table = ? AND name = ?", table, k).Scan(&typ)
		if err != nil {
			break // an expression, not a column: the key ranges use the columns before it
		}
		out = append(out, keyColumn{name: k, quoted: !strings.Contains(typ, "Int") && !strings.Contains(typ, "Float")})
	}
	return out, nil
}

func sqlString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// bounds returns, in key order, the conditions "key < b" at the boundaries between chunks of
// about ChunkRows rows of a partition of rows rows.
func (t rebuildTarget) bounds(ctx context.Context, rb Rebuild, inPart string, keys []keyColumn, rows uint64) ([]string, error) {
	every := max(rows/10_000, 1)
	names := make([]string, len(keys))
	strs := make([]string, len(keys))
	for i, k := range keys {
		names[i] = QuoteIdent(k.name)
		strs[i] = "toString(" + names[i] + ")"
	}
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s AND cityHash64(%s) %% %d = 0 ORDER BY %s",
		strings.Join(strs, ", "), t.q(rb.Table), inPart, strings.Join(names, ", "), every, strings.Join(names, ", "))
	rs, err := t.conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("rebuild %s: sample the key: %w", rb.Table, err)
	}
	defer rs.Close()
	var samples [][]string
	for rs.Next() {
		vals := make([]string, len(keys))
		dest := make([]any, len(keys))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rs.Scan(dest...); err != nil {
			return nil, err
		}
		for i, k := range keys {
			if k.quoted {
				vals[i] = sqlString(vals[i])
			}
		}
		samples = append(samples, vals)
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	per := int(max(rb.chunkRows()/every, 1))
	var out []string
	for i := per; i < len(samples); i += per {
		if b := lessThan(names, samples[i]); len(out) == 0 || out[len(out)-1] != b {
			out = append(out, b)
		}
	}
	return out, nil
}

// lessThan is the condition that (keys...) sorts before vals (SQL literals), written with
// plain comparisons so that the primary key can be used.
func lessThan(keys, vals []string) string {
	var ors []string
	for i := range keys {
		var ands []string
		for j := 0; j < i; j++ {
			ands = append(ands, keys[j]+" = "+vals[j])
		}
		ands = append(ands, keys[i]+" < "+vals[i])
		ors = append(ors, "("+strings.Join(ands, " AND ")+")")
	}
	return "(" + strings.Join(ors, " OR ") + ")"
}

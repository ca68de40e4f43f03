package feast

import (
	"fmt"
	"time"
)

// Op is one Redis write: HSET key fields, then EXPIRE key TTL when TTL > 0.
//
// A row op leaves Fields nil and appends its key's whole row in Build when the writer sends
// it (the feature processor's request, tenant, user and model rows do), from the state it was
// made with: that state must not change afterwards, or Build must take the lock its changes
// are made under (the feature processor's aggregate rows do, and may then write a later state). As each writes the whole row, a writer
// may send only the last row op of a pipeline on a key (sinks/redis coalesces so).
type Op struct {
	Key    string
	Fields map[string]any
	TTL    time.Duration
	// Build, when set, appends the key's whole row to dst as HSET arguments (field, value,
	// …; View.AppendRow) when the writer sends it; nil: Fields is the write.
	Build func(dst []any) []any
}

// AppendArgs appends the op's HSET arguments (field, value, …) to dst.
func (o Op) AppendArgs(dst []any) []any {
	if o.Build != nil {
		return o.Build(dst)
	}
	for f, v := range o.Fields {
		dst = append(dst, f, v)
	}
	return dst
}

// Row returns the fields the op writes, as a map from field to value.
func (o Op) Row() map[string]any {
	if o.Build == nil {
		return o.Fields
	}
	args := o.Build(nil)
	m := make(map[string]any, len(args)/2)
	for i := 0; i+1 < len(args); i += 2 {
		f, ok := args[i].(string)
		if !ok {
			panic(fmt.Sprintf("feast: op on %q built a field of type %T", o.Key, args[i]))
		}
		m[f] = args[i+1]
	}
	return m
}

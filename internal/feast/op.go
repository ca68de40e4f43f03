package feast

import "time"

// Op is one Redis write: HSET key fields, then EXPIRE key TTL when TTL > 0.
//
// A row op leaves Fields nil and builds its key's whole row in Build when the writer sends
// it (the feature processor's request, tenant, user and model rows do), from the state it was
// made with: that state must not change afterwards. As each writes the whole row, a writer
// may send only the last row op of a pipeline on a key (sinks/redis coalesces so).
type Op struct {
	Key    string
	Fields map[string]any
	TTL    time.Duration
	// Build, when set, builds the key's whole row when the writer sends it; nil: Fields is
	// the write.
	Build func() map[string]any
}

// Row returns the fields the op writes.
func (o Op) Row() map[string]any {
	if o.Build != nil {
		return o.Build()
	}
	return o.Fields
}

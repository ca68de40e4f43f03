package conf

import (
	"sort"
	"strings"
)

// UnknownVar is a variable with the schema's prefix that no key reads: a misspelling, most
// often, silently ignored otherwise. Nearest is the closest name that is read ("" when none is
// close).
type UnknownVar struct {
	Name, Nearest string
}

// UnknownEnv returns the variables of environ ("NAME=value" entries) that start with the
// schema's prefix and that no key reads: not a key's variable, a secret's, or its _FILE twin,
// nor one of also. They come sorted by name.
func (s *Schema) UnknownEnv(environ []string, also ...string) []UnknownVar {
	known := map[string]bool{}
	for _, n := range also {
		known[n] = true
	}
	for _, k := range s.keys {
		known[k.Env] = true
		if k.Secret != "" {
			known[k.Secret] = true
		}
	}
	var out []UnknownVar
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, s.prefix) || known[name] {
			continue
		}
		u := UnknownVar{Name: name}
		best := 4 // farther than 3 edits is no suggestion
		for n := range known {
			if d := distance(name, n); d < best || d == best && n < u.Nearest {
				best, u.Nearest = d, n
			}
		}
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

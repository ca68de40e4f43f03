package dlq

import (
	"slices"
	"sync"
)

// Class is an error class a DLQ entry can carry (its backflow.error.class header), and what it
// means.
type Class struct {
	Name, Doc string
}

var (
	classMu sync.Mutex
	classes = map[string]string{ClassUnknown: "the error named no class of its own"}
)

// RegisterClass declares a class the product writes to the DLQ, with one line on what it means.
// Each package that classifies bad records registers its classes in an init function, so the
// list in `backflow dlq --help` and the check of --class are never out of step with the code.
func RegisterClass(name, doc string) {
	classMu.Lock()
	defer classMu.Unlock()
	classes[normalizeClass(name)] = doc
}

// Classes returns every registered class, sorted by name.
func Classes() []Class {
	classMu.Lock()
	defer classMu.Unlock()
	out := make([]Class, 0, len(classes))
	for n, d := range classes {
		out = append(out, Class{Name: n, Doc: d})
	}
	slices.SortFunc(out, func(a, b Class) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// KnownClass reports whether name is a registered class.
func KnownClass(name string) bool {
	classMu.Lock()
	defer classMu.Unlock()
	_, ok := classes[name]
	return ok
}

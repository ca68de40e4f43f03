// Package layering holds the rule that imports go one way through backflow's tree, and the
// test that keeps the tree to it (layering_test.go). Check is the rule; Layer names the rooms.
//
// The layers, lowest first: leaf libraries (internal/...), contracts (avro, the sinks package
// itself), stages (processors/*, sinks/*), wiring (pipelines, pipelines/*), mains (cmd/*). A
// package imports only from lower layers, except that leaf libraries may import each other
// and so may the wiring's packages; a stage never imports another stage, but a stage's package
// may import the packages below its own folder, which are parts of its room (the ClickHouse
// sink, sinks/clickhouse, runs on its schema engine, sinks/clickhouse/chschema); a part never
// imports the package above it, except a stage that runs on an engine (Engines): the rollup
// loop and the DLQ mirror, stages of their own below sinks/clickhouse, run their mappings on
// its one loop, so each may import the loop and its other parts, but not the other stage,
// and the loop imports neither. What is not the product (tools/, test/, bench/, deploy/) may
// import anything, and the product never imports it.
package layering

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Engines maps a stage package that other stages run on to those stages, each below it in
// its room: the ClickHouse sink's one loop runs the rollup loop's and the DLQ mirror's
// mappings (docs/architecture.md, "One loop, four mappings").
var Engines = map[string][]string{
	"sinks/clickhouse": {"sinks/clickhouse/dlqmirror", "sinks/clickhouse/rollups"},
}

// within reports whether pkg is dir or below it.
func within(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// onEngine reports whether dep is a stage that runs on the engine pkg (or a part of one).
func onEngine(pkg, dep string) bool {
	return slices.ContainsFunc(Engines[pkg], func(s string) bool { return within(dep, s) })
}

// runsOn reports whether pkg is a stage (or a part of one) that runs on an engine and dep is
// that engine or one of the engine's parts that belongs to none of its stages.
func runsOn(pkg, dep string) bool {
	for engine := range Engines {
		if onEngine(engine, pkg) && within(dep, engine) && !onEngine(engine, dep) {
			return true
		}
	}
	return false
}

// Layer is a room of the tree, in import order: a package may import from lower layers.
type Layer int

// The layers, lowest first. Apart is what is not the product.
const (
	Leaf Layer = iota
	Contract
	Stage
	Wiring
	Main
	Apart
)

func (l Layer) String() string {
	return [...]string{"leaf library", "contract", "stage", "wiring", "main", "not the product"}[l]
}

// LayerOf places a package path relative to the module root ("processors/ingest").
func LayerOf(rel string) Layer {
	top, _, _ := strings.Cut(rel, "/")
	switch {
	case top == "internal":
		return Leaf
	case rel == "avro" || rel == "sinks":
		return Contract
	case top == "processors" || top == "sinks":
		if rel == "processors" { // the doc-only parent package
			return Contract
		}
		return Stage
	case top == "pipelines":
		return Wiring
	case top == "cmd":
		return Main
	default:
		return Apart
	}
}

// Check returns one line per import that breaks the rule, sorted; imports maps each package
// (relative path) to the module's own packages it imports (relative paths).
func Check(imports map[string][]string) []string {
	var bad []string
	for pkg, deps := range imports {
		from := LayerOf(pkg)
		if from == Apart {
			continue
		}
		for _, dep := range deps {
			to := LayerOf(dep)
			var why string
			switch {
			case to == Apart:
				why = "the product never imports what is not the product"
			case to > from:
				why = fmt.Sprintf("a %s may not import a %s (imports go one way)", from, to)
			case to == from && from == Stage && onEngine(pkg, dep):
				why = "an engine never imports a stage that runs on it"
			case to == from && from == Stage && strings.HasPrefix(dep, pkg+"/"):
				// a part of the stage's own room
			case to == from && from == Stage && runsOn(pkg, dep):
				// a stage on an engine: the engine and its parts
			case to == from && from == Stage:
				why = "a stage may not import another stage: share through a contract (avro, sinks) or wire them in pipelines"
			case to == from && (from == Contract || from == Main) && dep != pkg:
				why = fmt.Sprintf("a %s may not import another %s", from, to)
			}
			if why != "" {
				bad = append(bad, fmt.Sprintf("%s (%s) imports %s (%s): %s", pkg, from, dep, to, why))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

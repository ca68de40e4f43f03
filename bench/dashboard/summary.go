package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/backflowhq/backflow/internal/dashboard"
)

// summary is bench/dashboard.json: the run's figures, small enough to commit.
type summary struct {
	Started string `json:"started"`
	Commit  string `json:"commit"`
	Machine struct {
		Cores            int    `json:"cores"`
		LoadAverageStart string `json:"load_average_start"`
	} `json:"machine"`
	ClickHouse string   `json:"clickhouse"`
	Days       int      `json:"days"`
	Runs       int      `json:"runs"`
	Ranges     []string `json:"ranges"`
	// NewMigrations are the migrations the new layout got (the old one: up to 0014).
	NewMigrations []string     `json:"new_migrations"`
	Sizes         []sizeResult `json:"sizes"`
	Targets       targetResult `json:"targets"`
}

type sizeResult struct {
	Size     string `json:"size"`
	Requests uint64 `json:"requests"`
	// Rows are the raw rows of the sunk tables and of the rollups in the new layout (the old
	// one has the same sunk rows and no rollups).
	Rows   map[string]uint64  `json:"rows"`
	DiskMB map[string]float64 `json:"disk_mb"` // per layout
	// Layout is how the new layout sorts and partitions inference_results.
	Layout tableLayout `json:"new_layout"`
	// FillS is the time both layouts took to fill (INSERT ... SELECT FROM numbers());
	// BackfillS the new layout's rollup.Backfill of every source.
	FillS     float64       `json:"fill_s"`
	BackfillS float64       `json:"backfill_s"`
	Panels    []panelResult `json:"panels"`
}

// panel is the result of panel id over rng, added in --ranges order when it is new.
func (z *sizeResult) panel(id, rng string) *panelResult {
	for i := range z.Panels {
		if z.Panels[i].Panel == id && z.Panels[i].Range == rng {
			return &z.Panels[i]
		}
	}
	z.Panels = append(z.Panels, panelResult{Panel: id, Range: rng})
	return &z.Panels[len(z.Panels)-1]
}

// sortPanels puts the results in the order of ranges, then of dashboard.Panels.
func (z *sizeResult) sortPanels(ranges []string) {
	rank := map[string]int{}
	for i, r := range ranges {
		rank["r"+r] = i
	}
	for i, p := range dashboard.Panels {
		rank["p"+p.ID] = i
	}
	sort.SliceStable(z.Panels, func(i, j int) bool {
		a, b := z.Panels[i], z.Panels[j]
		if a.Range != b.Range {
			return rank["r"+a.Range] < rank["r"+b.Range]
		}
		return rank["p"+a.Panel] < rank["p"+b.Panel]
	})
}

type tableLayout struct {
	SortingKey   string `json:"sorting_key"`
	PartitionKey string `json:"partition_key"`
}

type panelResult struct {
	Panel string  `json:"panel"`
	Range string  `json:"range"`
	Old   *timing `json:"old,omitempty"` // absent at a range the old layout was not timed at
	New   timing  `json:"new"`
}

// timing is one query's best and worst of its runs, and the rows ClickHouse read in the best.
type timing struct {
	Runs     int     `json:"runs"`
	BestMs   float64 `json:"best_ms"`
	WorstMs  float64 `json:"worst_ms"`
	RowsRead uint64  `json:"rows_read"`
}

// targetResult holds the targets against the largest size: every panel at every range within
// 1 s, and each panel's 30-minute time within 1.5 times its time at the smallest size.
type targetResult struct {
	Largest         string             `json:"largest"`
	SlowestNew      string             `json:"slowest_new"`
	SlowestNewMs    float64            `json:"slowest_new_ms"`
	AllWithin1s     bool               `json:"all_within_1s"`
	ThirtyMinRatio  map[string]float64 `json:"thirty_min_ratio,omitempty"` // per panel: largest / smallest size, new layout
	AllRatiosWithin bool               `json:"all_30m_ratios_within_1_5"`
}

func targets(sizes []sizeResult) targetResult {
	var t targetResult
	if len(sizes) == 0 {
		return t
	}
	large, small := sizes[len(sizes)-1], sizes[0]
	t.Largest = large.Size
	t.AllWithin1s = true
	for _, p := range large.Panels {
		if p.New.BestMs > t.SlowestNewMs {
			t.SlowestNewMs, t.SlowestNew = p.New.BestMs, p.Panel+" "+p.Range
		}
		t.AllWithin1s = t.AllWithin1s && p.New.BestMs <= 1000
	}
	if len(sizes) < 2 {
		return t
	}
	t.ThirtyMinRatio = map[string]float64{}
	t.AllRatiosWithin = true
	for _, p := range large.Panels {
		if p.Range != "30m" {
			continue
		}
		for _, q := range small.Panels {
			if q.Panel == p.Panel && q.Range == p.Range && q.New.BestMs > 0 {
				r := p.New.BestMs / q.New.BestMs
				t.ThirtyMinRatio[p.Panel] = float64(int(r*100+0.5)) / 100
				t.AllRatiosWithin = t.AllRatiosWithin && r <= 1.5
			}
		}
	}
	return t
}

// markdown is the table of docs/benchmarks.md: per panel and range, the old layout's and the
// new one's best time at each size.
func markdown(s summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d-core machine, ClickHouse %s, %d days of traffic, best of %d (worst in brackets), ms:\n\n", s.Machine.Cores, s.ClickHouse, s.Days, s.Runs)
	b.WriteString("| panel | range |")
	for _, z := range s.Sizes {
		fmt.Fprintf(&b, " old, %s | new, %s |", z.Size, z.Size)
	}
	b.WriteString("\n|---|---|")
	for range s.Sizes {
		b.WriteString("---:|---:|")
	}
	b.WriteString("\n")
	type key struct{ panel, rng string }
	var keys []key
	byKey := map[key][]panelResult{}
	for _, z := range s.Sizes {
		for _, p := range z.Panels {
			k := key{p.Panel, p.Range}
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], p)
		}
	}
	for _, k := range keys {
		fmt.Fprintf(&b, "| %s | %s |", k.panel, k.rng)
		for _, p := range byKey[k] {
			fmt.Fprintf(&b, " %s | %s |", ms(p.Old), ms(&p.New))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nslowest new panel at %s: %s, %.0f ms; every panel within 1 s: %v", s.Targets.Largest, s.Targets.SlowestNew, s.Targets.SlowestNewMs, s.Targets.AllWithin1s)
	if len(s.Sizes) > 1 {
		fmt.Fprintf(&b, "; 30-min panels at %s over %s within 1.5×: %v", s.Targets.Largest, s.Sizes[0].Size, s.Targets.AllRatiosWithin)
	} else {
		b.WriteString("; the 30-min ratio needs two sizes")
	}
	b.WriteString("\n")
	var panels []string
	for p := range s.Targets.ThirtyMinRatio {
		panels = append(panels, p)
	}
	sort.Strings(panels)
	for _, p := range panels {
		fmt.Fprintf(&b, "  %s 30m: %.2f×\n", p, s.Targets.ThirtyMinRatio[p])
	}
	return b.String()
}

// ms is a timing as the table shows it: the best, and the worst in brackets when it ran more
// than once; "–" when it did not run.
func ms(t *timing) string {
	if t == nil || t.Runs == 0 {
		return "–"
	}
	f := func(v float64) string {
		if v >= 100 {
			return fmt.Sprintf("%.0f", v)
		}
		return fmt.Sprintf("%.1f", v)
	}
	if t.Runs == 1 {
		return f(t.BestMs) + " (1 run)"
	}
	return f(t.BestMs) + " (" + f(t.WorstMs) + ")"
}

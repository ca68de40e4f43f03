package main

import (
	"context"
	"math"
	"time"
)

// standbyCost is what hot standby costs while nothing fails: the same steady traffic over
// the same window, measured on the three instances without standby, then again after they
// were restarted with it (its standby copies caught up first).
type standbyCost struct {
	Run int        `json:"run"`
	Off costWindow `json:"off"`
	On  costWindow `json:"on"`
}

// costWindow is one window's cost, summed over the instances.
type costWindow struct {
	WindowSeconds float64 `json:"window_s"`
	// CPUCores: CPU seconds of the three processes over the window's seconds.
	CPUCores float64 `json:"cpu_cores"`
	// StateMB: the storage dirs' size at the window's end, summed over the instances.
	StateMB int64 `json:"state_mb"`
	// ChangelogRecords: records written to the two table changelogs in the window. Every
	// instance reads its own partitions' share at a restore; with standby, it reads every
	// partition's, all the time: (instances - 1) × this many reads more.
	ChangelogRecords int64 `json:"changelog_records"`
}

// standbySettle is how long a standby window waits after the restart before measuring:
// the standby copies catch up with their changelogs first.
const standbySettle = 15 * time.Second

// costWindow measures d of steady traffic on the running instances.
func (rc *restartCluster) costWindow(ctx context.Context, d time.Duration) costWindow {
	cpu := func() float64 {
		var s float64
		for _, in := range rc.inst {
			if in.c != nil {
				s += in.c.sample().CPU
			}
		}
		return s
	}
	changelog := func() int64 {
		n, err := rc.h.st.endOffsets(ctx, rc.tables...)
		if err != nil {
			say("restart %s: changelog end offsets: %v", rc.tag, err)
		}
		return n
	}
	c0, l0, t0 := cpu(), changelog(), time.Now()
	sleepCtx(ctx, d)
	c1, l1, secs := cpu(), changelog(), time.Since(t0).Seconds()
	var mb int64
	for _, n := range rc.stateMB() {
		mb += n
	}
	return costWindow{WindowSeconds: round1(secs), CPUCores: round2((c1 - c0) / secs), StateMB: mb, ChangelogRecords: l1 - l0}
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// standbySummary is the median over the runs of what standby adds, with its spread.
type standbySummary struct {
	Samples        int    `json:"samples"`
	CPURatio       spread `json:"cpu_on_over_off"`
	StateRatio     spread `json:"state_on_over_off"`
	ChangelogReads spread `json:"extra_changelog_reads_per_s"`
}

func summarizeStandby(cs []standbyCost) *standbySummary {
	if len(cs) == 0 {
		return nil
	}
	var cpu, state, reads []float64
	for _, c := range cs {
		if c.Off.CPUCores > 0 && c.Off.StateMB > 0 && c.On.WindowSeconds > 0 {
			cpu = append(cpu, round2(c.On.CPUCores/c.Off.CPUCores))
			state = append(state, round2(float64(c.On.StateMB)/float64(c.Off.StateMB)))
			reads = append(reads, round1(float64(c.On.ChangelogRecords*(restartInstances-1))/c.On.WindowSeconds))
		}
	}
	return &standbySummary{Samples: len(cpu), CPURatio: spreadOf(cpu), StateRatio: spreadOf(state), ChangelogReads: spreadOf(reads)}
}

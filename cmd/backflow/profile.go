package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/spf13/pflag"
)

// profiles writes Go pprof profiles of one command run, for benchmarks (bench/) and for finding
// where a stage spends its time: a CPU profile from start to exit, an allocation profile (heap,
// with every allocation since start) at exit, and a block profile (where goroutines waited, on
// channels, selects and locks) at exit. Lifecycle: flags, then start before the command runs,
// then stop once it returned (also after an error).
type profiles struct {
	cpuPath, allocPath, blockPath string
	cpu                           *os.File
}

// blockRate samples one blocking event per this many nanoseconds spent blocked: cheap enough
// to leave on while a stage drains a backlog.
const blockRate = 100_000

func (p *profiles) flags(f *pflag.FlagSet) {
	f.StringVar(&p.cpuPath, "cpu-profile", "", "write a pprof CPU profile of the whole run to this file (go tool pprof FILE)")
	f.StringVar(&p.allocPath, "alloc-profile", "", "write a pprof allocation profile to this file at exit (go tool pprof -sample_index=alloc_space FILE)")
	f.StringVar(&p.blockPath, "block-profile", "", "write a pprof block profile (where goroutines waited) to this file at exit")
}

func (p *profiles) start() error {
	if p.blockPath != "" {
		runtime.SetBlockProfileRate(blockRate)
	}
	if p.cpuPath == "" || p.cpu != nil {
		return nil
	}
	f, err := os.Create(p.cpuPath)
	if err != nil {
		return fmt.Errorf("%w: --cpu-profile: %w", errUsage, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--cpu-profile: %w", err)
	}
	p.cpu = f
	return nil
}

func (p *profiles) stop() error {
	var errs []error
	if p.cpu != nil {
		pprof.StopCPUProfile()
		errs = append(errs, p.cpu.Close())
		p.cpu = nil
	}
	if p.allocPath != "" {
		f, err := os.Create(p.allocPath)
		if err != nil {
			return fmt.Errorf("--alloc-profile: %w", err)
		}
		runtime.GC() // up-to-date statistics
		errs = append(errs, pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
	}
	if p.blockPath != "" {
		f, err := os.Create(p.blockPath)
		if err != nil {
			return fmt.Errorf("--block-profile: %w", err)
		}
		errs = append(errs, pprof.Lookup("block").WriteTo(f, 0), f.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("write profiles: %w", err)
	}
	return nil
}

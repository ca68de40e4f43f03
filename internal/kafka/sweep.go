package kafka

import (
	"context"
	"time"

	"github.com/lovoo/goka"
)

// Sweeper runs a goka visitor over a processor's table every interval (goka's VisitAll).
//
// Lifecycle: StartSweeper after the processor started; Stop before the processor's context is
// cancelled. Stop waits for a visit in flight to finish: goka v1.1.14 reads its visit counter
// without synchronisation when a processor stop aborts a visit (the race detector reports it),
// so a visit is never aborted by a stop; it runs to its end first.
type Sweeper struct {
	stop chan struct{}
	done chan struct{}
}

// StartSweeper visits every key of proc's table with the visitor name every interval;
// onErr (optional) hears about failed sweeps.
func StartSweeper(proc *goka.Processor, name string, every time.Duration, onErr func(error)) *Sweeper {
	s := &Sweeper{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				if err := proc.VisitAll(context.Background(), name, nil); err != nil && onErr != nil {
					onErr(err)
				}
			}
		}
	}()
	return s
}

// Stop ends the sweeps and waits for one in flight to finish. It may be called more than once.
func (s *Sweeper) Stop() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

package testenv

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/kafka"
)

// Behind counts the partitions of topics that group has not committed to their end offset; a
// topic without partitions (not created yet) counts as one. With emptyOK, a partition that never
// held a record needs no commit.
func Behind(ctx context.Context, cl *kgo.Client, group string, emptyOK bool, topics ...string) (int, error) {
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return 0, err
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0, err
	}
	behind := 0
	for _, topic := range topics {
		parts := ends[topic]
		if len(parts) == 0 {
			behind++
			continue
		}
		for _, e := range parts {
			if e.Err != nil {
				behind++
				continue
			}
			c, ok := offs.Lookup(e.Topic, e.Partition)
			if ok && c.Err != nil {
				return 0, c.Err
			}
			if ok && c.At != e.Offset || !ok && (e.Offset > 0 || !emptyOK) {
				behind++
			}
		}
	}
	return behind, nil
}

// CommittedOffsets is group's committed offset per partition of topic; empty while the group
// has committed nothing (or has not joined yet).
func CommittedOffsets(t testing.TB, k kafka.Conn, group, topic string) map[int32]int64 {
	t.Helper()
	cl, err := k.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[int32]int64{}
	offs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			out[o.Partition] = o.At
		}
	})
	return out
}

// WaitCommitted waits until group has committed every partition of topics to its end offset,
// and fails t when ctx ends first, with ctx's cause (see Stage.Context).
func WaitCommitted(t testing.TB, ctx context.Context, cl *kgo.Client, group string, topics ...string) {
	t.Helper()
	waitCommitted(t, ctx, cl, group, false, topics)
}

// WaitCommittedOrEmpty is WaitCommitted where a partition that never held a record needs no
// commit (a DLQ topic that got nothing in some partitions).
func WaitCommittedOrEmpty(t testing.TB, ctx context.Context, cl *kgo.Client, group string, topics ...string) {
	t.Helper()
	waitCommitted(t, ctx, cl, group, true, topics)
}

func waitCommitted(t testing.TB, ctx context.Context, cl *kgo.Client, group string, emptyOK bool, topics []string) {
	t.Helper()
	for {
		behind, err := Behind(ctx, cl, group, emptyOK, topics...)
		if err == nil && behind == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s did not commit the end of %v: %d partitions behind (%v): %v", group, topics, behind, err, context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stage is a stage under test (or any blocking run) in a goroutine of the test process.
type Stage struct {
	t    testing.TB
	name string
	stop context.CancelFunc
	done chan struct{}
	err  error
	ctx  context.Context
}

// StartStage runs run(ctx) in a goroutine until Stop (or ctx's end). Should the test end first,
// it is stopped then (its error unchecked).
func StartStage(t testing.TB, ctx context.Context, name string, run func(context.Context) error) *Stage {
	t.Helper()
	runCtx, stop := context.WithCancel(ctx)
	watch, ended := context.WithCancelCause(ctx)
	s := &Stage{t: t, name: name, stop: stop, done: make(chan struct{}), ctx: watch}
	go func() {
		s.err = run(runCtx)
		close(s.done)
		ended(fmt.Errorf("%s stopped: %v", name, s.err))
	}()
	t.Cleanup(func() { stop(); <-s.done })
	return s
}

// Context ends when the ctx of StartStage does, or when the stage returns, with that as its
// cause: a wait on it fails at once, saying why, if the stage dies.
func (s *Stage) Context() context.Context { return s.ctx }

// Done is closed when the stage has returned.
func (s *Stage) Done() <-chan struct{} { return s.done }

// Err is what the stage returned; it waits for that.
func (s *Stage) Err() error {
	<-s.done
	return s.err
}

// Stop stops the stage, waits for it and fails the test if it returned an error.
func (s *Stage) Stop() {
	s.t.Helper()
	s.stop()
	if err := s.Err(); err != nil {
		s.t.Fatalf("%s: %v", s.name, err)
	}
}

// RunUntilCommitted runs a stage until group has committed the end of topics (a partition
// that never held a record needs no commit), then stops it; a stage that stops before, or
// returns an error, fails the test.
func RunUntilCommitted(t testing.TB, ctx context.Context, cl *kgo.Client, name, group string, topics []string, run func(context.Context) error) {
	t.Helper()
	s := StartStage(t, ctx, name, run)
	WaitCommittedOrEmpty(t, s.Context(), cl, group, topics...)
	s.Stop()
}

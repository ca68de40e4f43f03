package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/control"
	"github.com/backflowhq/backflow/processors/features"
)

// Action is a stage's own step of a replay. Apply runs it while the group has no live member:
// before the offsets move when AfterOffsets is false, after they moved when it is true. It
// returns one line on what it did, for the record.
type Action interface {
	// Describe says what the action will do, for the plan.
	Describe() string
	AfterOffsets() bool
	Apply(ctx context.Context, rec *Record) (string, error)
}

// Config is what Apply needs besides the plan.
type Config struct {
	Actions   []Action
	Recorders []Recorder
	// By names the operator (default Who()); Reason is free text kept with the record.
	By, Reason string
}

// Apply executes plan: it checks again that the group has no live member, checks that every
// recorder can record, runs the actions that go first (a new ingest epoch), commits the
// target offsets, runs the actions that go after (a feature state reset), then records the
// replay. A failure before the commit leaves the offsets as they were; a failure of a later
// action is reported with the record of what was done (run the same replay again to finish).
func Apply(ctx context.Context, cl *kgo.Client, plan *Plan, cfg Config) (Record, error) {
	if cfg.By == "" {
		cfg.By = Who()
	}
	rec := NewRecord(plan, cfg.By, cfg.Reason)
	adm := kadm.NewClient(cl)
	g, err := describe(ctx, adm, plan.Group)
	if err != nil {
		return rec, err
	}
	if len(g.Members) > 0 {
		return rec, &LiveError{Group: plan.Group, State: g.State, Members: g.Members}
	}
	for _, r := range cfg.Recorders {
		if err := r.Check(ctx); err != nil {
			return rec, fmt.Errorf("replay: cannot record in %s, nothing changed: %w", r.Name(), err)
		}
	}
	run := func(after bool) error {
		for _, a := range cfg.Actions {
			if a.AfterOffsets() != after {
				continue
			}
			did, err := a.Apply(ctx, &rec)
			if err != nil {
				return err
			}
			rec.Actions = append(rec.Actions, did)
		}
		return nil
	}
	if err := run(false); err != nil {
		return rec, fmt.Errorf("replay: offsets not moved: %w", err)
	}
	resp, err := adm.CommitOffsets(ctx, plan.Group, plan.Offsets())
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		if g2, derr := describe(ctx, adm, plan.Group); derr == nil && len(g2.Members) > 0 {
			return rec, &LiveError{Group: plan.Group, State: g2.State, Members: g2.Members}
		}
		return rec, fmt.Errorf("replay: commit offsets of %s: %w (actions done: %v)", plan.Group, err, rec.Actions)
	}
	aerr := run(true)
	var errs []error
	if aerr != nil {
		errs = append(errs, fmt.Errorf("replay: offsets moved, but a stage action failed (run the same replay again to finish it): %w", aerr))
		rec.Actions = append(rec.Actions, "FAILED: "+aerr.Error())
	}
	// Record even when ctx has just ended: the offsets moved.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, r := range cfg.Recorders {
		if err := r.Record(rctx, rec); err != nil {
			errs = append(errs, fmt.Errorf("%w in %s: %w", ErrNotRecorded, r.Name(), err))
		}
	}
	return rec, errors.Join(errs...)
}

// Epoch bumps ingest's replay epoch (key epoch/<group> in the control topic) before the
// offsets move, so claims made before the replay no longer count as seen and the replayed
// records' rows carry a newer version. Ingest reads its epoch when it starts.
type Epoch struct {
	Client       *kgo.Client
	ControlTopic string
	Group        string
	current      int32
	read         bool
}

// Read reads the current epoch (for the plan). Apply reads it again.
func (e *Epoch) Read(ctx context.Context) (int32, error) {
	n, err := control.ReadEpoch(ctx, e.Client, e.ControlTopic, e.Group)
	if err != nil {
		return 0, err
	}
	e.current, e.read = n, true
	return n, nil
}

// Describe implements Action: what it will do, as a step still to take.
func (e *Epoch) Describe() string {
	if !e.read {
		return fmt.Sprintf("ingest epoch of %s in %s: bump it by one", e.Group, e.ControlTopic)
	}
	return fmt.Sprintf("ingest epoch of %s in %s: bump it from %d to %d", e.Group, e.ControlTopic, e.current, e.current+1)
}

// AfterOffsets implements Action: the epoch moves first.
func (e *Epoch) AfterOffsets() bool { return false }

// Apply implements Action.
func (e *Epoch) Apply(ctx context.Context, rec *Record) (string, error) {
	cur, err := e.Read(ctx)
	if err != nil {
		return "", err
	}
	next := cur + 1
	if err := control.WriteEpoch(ctx, e.Client, e.ControlTopic, e.Group, control.EpochRecord{Epoch: next, Time: time.Now().UTC(), By: rec.By + " replay " + rec.ID}); err != nil {
		return "", fmt.Errorf("replay: write epoch: %w", err)
	}
	rec.Epoch = &EpochChange{From: cur, To: next}
	return fmt.Sprintf("ingest epoch of %s: %d -> %d", e.Group, cur, next), nil
}

// FeatureReset rebuilds the feature aggregator's state after the offsets moved: the table
// changelog re-created empty, the local table storage under StorageDir deleted, the aggregate
// rows deleted from Redis (ResetFeatures). The plan must also move the group's loopback
// topic to its end (Request.ToEnd), since deltas waiting there belong to the old state.
type FeatureReset struct {
	Client     *kgo.Client
	Redis      goredis.UniversalClient
	Sink       features.Config
	StorageDir string
}

// Describe implements Action: what it will do, as steps still to take.
func (f *FeatureReset) Describe() string {
	s := fmt.Sprintf("feature state of %s: re-create table %s empty, delete the aggregate rows of project %s from Redis",
		f.Sink.Group, f.Sink.TableTopic(), projectOf(f.Sink))
	if f.StorageDir != "" {
		s += ", delete the local table storage under " + f.StorageDir
	}
	return s + "; " + LocalStorageGuidance(f.Sink)
}

func projectOf(c features.Config) string {
	if c.Project == "" {
		return "backflow"
	}
	return c.Project
}

// AfterOffsets implements Action: the state goes once the offsets moved (a failure before that
// leaves a plain replay, which is a no-op for the aggregates).
func (f *FeatureReset) AfterOffsets() bool { return true }

// Apply implements Action.
func (f *FeatureReset) Apply(ctx context.Context, _ *Record) (string, error) {
	rep, err := ResetFeatures(ctx, kadm.NewClient(f.Client), f.Redis, f.Sink, f.StorageDir)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("feature state of %s reset: %s re-created (%d partitions), %d local table folder(s) and %d Redis aggregate row(s) deleted",
		f.Sink.Group, rep.TableTopic, rep.Partitions, len(rep.StorageDirs), rep.RedisDeleted), nil
}

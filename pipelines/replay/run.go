package replay

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/control"
	"github.com/backflowhq/backflow/processors/features"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/sinks/redis"
)

// DefaultControlTopic is where ingest keeps its replay epochs and every replay is recorded.
const DefaultControlTopic = control.DefaultTopic

// Options are a replay's stage steps and its record, besides the Request. The zero value is a
// plain offset move.
type Options struct {
	// NewEpoch bumps the replay epoch of an ingest group with the move (Epoch).
	NewEpoch bool
	// ResetState rebuilds a feature group's state from the replayed records (FeatureReset):
	// the loopback moves to its end, and the scope defaults to EnrichedTopic.
	ResetState bool
	// ControlTopic holds the epochs and the replay records. Default DefaultControlTopic.
	ControlTopic string
	// EnrichedTopic, Project and StorageDir describe the feature group for ResetState.
	// Defaults: "backflow.enriched", "backflow", features.DefaultStorageDir().
	EnrichedTopic, Project, StorageDir string
	// Reason is free text kept with the record.
	Reason string
}

func (o Options) withDefaults() Options {
	if o.ControlTopic == "" {
		o.ControlTopic = DefaultControlTopic
	}
	if o.EnrichedTopic == "" {
		o.EnrichedTopic = "backflow.enriched"
	}
	if o.Project == "" {
		o.Project = "backflow"
	}
	if o.StorageDir == "" {
		o.StorageDir = features.DefaultStorageDir()
	}
	return o
}

// Prepared is a planned replay: the plan and the stage steps that go with it. Preparing it
// changes nothing.
type Prepared struct {
	Plan    *Plan
	Actions []Action
	// Warnings are about the request (the plan's own warnings are in Plan.Warnings).
	Warnings []string
	opts     Options
	reset    *FeatureReset
}

// Complete adds to req what opts need (ResetState: the loopback's move to its end, the
// enriched topic as the default scope) and checks it without contacting Kafka; an error wraps
// ErrBadRequest. It returns warnings about the request.
func Complete(req Request, opts Options) (Request, []string, error) {
	opts = opts.withDefaults()
	var warnings []string
	if opts.NewEpoch && opts.ResetState {
		return req, nil, badRequest("--new-epoch is for an ingest group, --reset-state for a feature aggregator group: not both")
	}
	if opts.ResetState {
		// The loopback's waiting deltas belong to the state thrown away: it moves to its end.
		req.ToEnd = []string{LoopTopic(req.Group)}
		if !req.Scope.AllTopics && len(req.Scope.Topics) == 0 && req.Spec.Kind != FromFile {
			// Said, not silent: the scope the operator did not name is the one a rebuild needs.
			req.Scope.Topics = []TopicScope{{Topic: opts.EnrichedTopic}}
			warnings = append(warnings, fmt.Sprintf("no scope given: --reset-state moves %s (the aggregator's input, --enriched-topic) to the spec, "+
				"and %s to its end; name the scope (--topic %s, or --all-topics) to say so yourself", opts.EnrichedTopic, LoopTopic(req.Group), opts.EnrichedTopic))
		}
		if req.Spec.Kind != ToEarliest {
			warnings = append(warnings, fmt.Sprintf("--reset-state with %s: the rebuilt aggregates count only the records from the target on", req.Spec))
		}
	}
	return req, warnings, req.Validate()
}

// Prepare completes req (Complete), reads the state the plan shows (the current epoch) and
// builds the plan.
func Prepare(ctx context.Context, cl *kgo.Client, req Request, opts Options) (*Prepared, error) {
	opts = opts.withDefaults()
	req, warnings, err := Complete(req, opts)
	if err != nil {
		return nil, err
	}
	p := &Prepared{opts: opts, Warnings: warnings}
	if err := checkStage(ctx, cl, req.Group, opts); err != nil {
		return nil, err
	}
	if opts.NewEpoch {
		td, err := kadm.NewClient(cl).ListTopics(ctx, opts.ControlTopic)
		if err != nil {
			return nil, err
		}
		if d, ok := td[opts.ControlTopic]; !ok || d.Err != nil {
			return nil, fmt.Errorf("--new-epoch: control topic %s does not exist: is %s an ingest group (ingest creates it at start-up)?", opts.ControlTopic, req.Group)
		}
		e := &Epoch{Client: cl, ControlTopic: opts.ControlTopic, Group: req.Group}
		if _, err := e.Read(ctx); err != nil {
			return nil, err
		}
		p.Actions = append(p.Actions, e)
	}
	if opts.ResetState {
		p.reset = &FeatureReset{Client: cl, Sink: features.Config{Group: req.Group, EnrichedTopic: opts.EnrichedTopic, Project: opts.Project}, StorageDir: opts.StorageDir}
		p.Actions = append(p.Actions, p.reset)
	}
	plan, err := Build(ctx, cl, req)
	if err != nil {
		return nil, err
	}
	p.Plan = plan
	return p, nil
}

// Systems are where an executed replay reaches besides Kafka: ClickHouse for the replay_log
// record, Redis for a feature state reset.
type Systems struct {
	ClickHouse chschema.Conn
	Redis      redis.Conn
	// Replication is the control topic's replication factor should it have to be created.
	Replication int16
}

// Execute applies the prepared replay (Apply): refused with a *LiveError while the group has
// live members; recorded in the control topic and in ClickHouse's replay_log, and not executed
// when it cannot be recorded.
func (p *Prepared) Execute(ctx context.Context, cl *kgo.Client, sys Systems) (Record, error) {
	if p.Plan.Live() {
		return Record{}, &LiveError{Group: p.Plan.Group, State: p.Plan.State, Members: p.Plan.Members}
	}
	if p.reset != nil {
		rdb, err := redis.Open(ctx, sys.Redis)
		if err != nil {
			return Record{}, fmt.Errorf("--reset-state: %w", err)
		}
		defer rdb.Close()
		p.reset.Redis = rdb
	}
	ch, err := chschema.Open(ctx, sys.ClickHouse)
	if err != nil {
		return Record{}, fmt.Errorf("replay_log: %w (a replay is executed only when it can be recorded)", err)
	}
	defer ch.Close()
	return Apply(ctx, cl, p.Plan, Config{
		Actions:   p.Actions,
		Recorders: []Recorder{ControlTopic{Client: cl, Topic: p.opts.ControlTopic, Replication: sys.Replication}, ClickHouseLog{Conn: ch}},
		Reason:    p.opts.Reason,
	})
}

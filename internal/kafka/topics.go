package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/retry"
)

// TopicSpec describes a topic to create.
type TopicSpec struct {
	Name        string
	Partitions  int32
	Replication int16             // 0 means 1
	Configs     map[string]string // e.g. {"cleanup.policy": "compact"}
}

// EnsureTopics creates the topics that do not exist yet and leaves existing ones as they are
// (brokers run with automatic topic creation off, so every stage creates what it owns).
func EnsureTopics(ctx context.Context, cl *kgo.Client, specs ...TopicSpec) error {
	adm := kadm.NewClient(cl)
	created := map[string]bool{}
	for _, s := range specs {
		rf := s.Replication
		if rf == 0 {
			rf = 1
		}
		var conf map[string]*string
		for k, v := range s.Configs {
			if conf == nil {
				conf = map[string]*string{}
			}
			conf[k] = kadm.StringPtr(v)
		}
		resp, err := adm.CreateTopic(ctx, s.Partitions, rf, conf, s.Name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("kafka: create topic %s: %w", s.Name, err)
		}
		created[s.Name] = err == nil
	}
	return waitListed(ctx, adm, specs, created)
}

// waitListed waits until the metadata lists every topic of specs with all its partitions, and
// every partition of a topic in created with a leader: a topic just created takes a moment to
// appear, and a caller that reads its metadata at once (a producer counting partitions) would
// otherwise find it missing; goka's consumer, asking a partition's leader for its offsets right
// after, failed on a 3-broker cluster with NOT_LEADER_FOR_PARTITION (fault suite #17). A topic
// that existed before is not held to its leaders (a broker may be down). It gives up after 30 s
// (a loaded single broker has taken more than 10 s to list a topic it had just created).
func waitListed(ctx context.Context, adm *kadm.Client, specs []TopicSpec, created map[string]bool) error {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	missing := ""
	err := retry.Do(ctx, retry.Policy{Min: 100 * time.Millisecond, Max: 100 * time.Millisecond}, nil, nil, func() error {
		td, err := adm.ListTopics(ctx, names...)
		for _, n := range names {
			if d, ok := td[n]; err != nil || !ok || d.Err != nil || len(d.Partitions) == 0 || created[n] && !led(d) {
				missing = n
				return cmp.Or(err, errNotListed)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("kafka: topic %s created but not in the metadata: %w", missing, err)
	}
	return nil
}

// errNotListed: a topic is not in the metadata, or not with all its partitions and leaders, yet.
var errNotListed = errors.New("kafka: not listed yet")

// led reports whether every partition of d has a leader and no error.
func led(d kadm.TopicDetail) bool {
	for _, p := range d.Partitions {
		if p.Leader < 0 || p.Err != nil {
			return false
		}
	}
	return true
}

// WaitForTopics returns once every topic exists with at least one partition, polling the
// metadata every 500ms and logging every 30s what it still waits for and for how long
// ("still waiting for kafka (2m10s)"); or ctx's error. A stage
// started before its input topic (a fresh cluster, or its producer starting in the same
// process) waits rather than fails.
func WaitForTopics(ctx context.Context, cl *kgo.Client, log *slog.Logger, topics ...string) error {
	adm := kadm.NewClient(cl)
	var (
		start   = time.Now()
		lastLog time.Time
		missing []string
	)
	return retry.Do(ctx, retry.Policy{Min: 500 * time.Millisecond, Max: 500 * time.Millisecond}, nil, func(err error, _ int, _ time.Duration) {
		if time.Since(lastLog) < waitLogEvery {
			return
		}
		lastLog = time.Now()
		waited := time.Since(start).Round(time.Second).String()
		if errors.Is(err, errNotListed) {
			log.Info("waiting for topics to be created", "topics", strings.Join(missing, ","), "waited", waited)
		} else {
			log.Warn("still waiting for kafka ("+waited+")", "error", err, "waited", waited)
		}
	}, func() error {
		// One attempt is bounded, so a request stuck on a half-open connection cannot hold the
		// wait (and its log line) until the stage stops.
		actx, cancel := context.WithTimeout(ctx, waitAttemptTimeout)
		defer cancel()
		td, err := adm.ListTopics(actx, topics...)
		if err != nil {
			return err
		}
		missing = missing[:0]
		for _, t := range topics {
			if d, ok := td[t]; !ok || d.Err != nil || len(d.Partitions) == 0 {
				missing = append(missing, t)
			}
		}
		if len(missing) > 0 {
			return errNotListed
		}
		return nil
	})
}

// WaitForTopics' pace: one attempt may take waitAttemptTimeout, and a line is logged at most
// every waitLogEvery (variables, so a test can shorten them).
var (
	waitAttemptTimeout = 10 * time.Second
	waitLogEvery       = 30 * time.Second
)

// CheckTableChangelog looks at a goka group table's changelog topic and returns what is wrong
// with it, or "" when it is fine or does not exist yet (goka creates it compacted). goka
// itself ignores a changelog it did not create, whatever its settings. A changelog that is
// not compacted loses keys to retention: a store rebuilt from it forgets what the group has
// seen (the dedupe claims, the aggregates' high-water marks). Stages log the problem and set
// MetricTableChangelogMisconfigured at start-up, and run on: stopping would only crash-loop,
// since the topic needs an operator (`kafka-configs --alter --add-config
// cleanup.policy=compact`).
func CheckTableChangelog(ctx context.Context, cl *kgo.Client, topic string) (string, error) {
	adm := kadm.NewClient(cl)
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return "", fmt.Errorf("kafka: describe %s: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("kafka: describe %s: %w", topic, err)
	}
	if len(rc.Configs) == 0 {
		return "", nil // not (yet) known to the broker that answered: goka creates it compacted
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			if !strings.Contains(c.MaybeValue(), "compact") {
				return fmt.Sprintf("table changelog %s is not compacted (cleanup.policy=%s): a store rebuilt from it loses what retention deleted; set cleanup.policy=compact", topic, c.MaybeValue()), nil
			}
			return "", nil
		}
	}
	return fmt.Sprintf("table changelog %s has no cleanup.policy: want compact", topic), nil
}

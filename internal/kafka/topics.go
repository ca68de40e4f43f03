package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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

// Source is a topic a stage reads, with the config key that names it ("ingest.inference_topic"),
// so that a wait for it says what to check.
type Source struct {
	Topic string
	Key   string
}

// SourceWait is how AwaitSources reports its wait.
type SourceWait struct {
	// Log gets a line every waitLogEvery while a topic is missing (naming topic and key) or
	// Kafka does not answer. Default slog.Default().
	Log *slog.Logger
	// Waiting, if set, is called after every failed look with why the stage cannot start yet
	// (what /readyz shows for it), and with nil once the topics are there after a wait; not
	// at all when they are there at once.
	Waiting func(error)
}

// AwaitSources is a stage's one wait at start-up: it returns the metadata of its source topics
// once every one exists with at least one partition, or ctx's error. A topic missing from the
// metadata is looked for again every 500ms, for as long as it takes (a fresh cluster, its
// producer starting in the same process, a broker just restarted whose metadata lags); a
// Kafka that does not answer is retried with backoff up to 5s. It logs at most every
// waitLogEvery what it still waits for and for how long. What waiting cannot fix (partition
// counts that do not match) is the caller's to check on what it returns.
func AwaitSources(ctx context.Context, cl *kgo.Client, w SourceWait, sources ...Source) (kadm.TopicDetails, error) {
	log := w.Log
	if log == nil {
		log = slog.Default()
	}
	adm := kadm.NewClient(cl)
	names := make([]string, len(sources))
	for i, s := range sources {
		names[i] = s.Topic
	}
	var (
		start   = time.Now()
		lastLog time.Time
		missing []Source
		td      kadm.TopicDetails
	)
	err := retry.Do(ctx, retry.Policy{Min: 500 * time.Millisecond, Max: 5 * time.Second}, nil, func(err error, _ int, _ time.Duration) {
		if w.Waiting != nil {
			defer w.Waiting(err) // after the line, so what it reports has been logged
		}
		if time.Since(lastLog) < waitLogEvery {
			return
		}
		lastLog = time.Now()
		waited := time.Since(start).Round(time.Second).String()
		if !errors.Is(err, errNotListed) {
			log.Warn("still waiting for kafka ("+waited+")", "error", err, "waited", waited)
			return
		}
		for _, s := range missing {
			log.Info("waiting for topic to be created", "topic", s.Topic, "key", s.Key, "waited", waited)
		}
	}, func() error {
		// One attempt is bounded, so a request stuck on a half-open connection cannot hold the
		// wait (and its log line) until the stage stops.
		actx, cancel := context.WithTimeout(ctx, waitAttemptTimeout)
		defer cancel()
		var err error
		if td, err = adm.ListTopics(actx, names...); err != nil {
			return err
		}
		missing = missing[:0]
		var which []string
		for _, s := range sources {
			if d, ok := td[s.Topic]; !ok || d.Err != nil || len(d.Partitions) == 0 {
				missing = append(missing, s)
				which = append(which, fmt.Sprintf("%s (%s)", s.Topic, cmp.Or(s.Key, "topic")))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%w: waiting for topic %s", errNotListed, strings.Join(which, ", "))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if w.Waiting != nil && !lastLog.IsZero() {
		w.Waiting(nil)
	}
	return td, nil
}

// WaitForTopics is AwaitSources for topics named by no config key (a tool's own topics).
func WaitForTopics(ctx context.Context, cl *kgo.Client, log *slog.Logger, topics ...string) error {
	sources := make([]Source, len(topics))
	for i, t := range topics {
		sources[i] = Source{Topic: t}
	}
	_, err := AwaitSources(ctx, cl, SourceWait{Log: log}, sources...)
	return err
}

// AwaitSources' pace: one attempt may take waitAttemptTimeout, and a line is logged at most
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

// TopicRetention is topic's retention.ms as a duration: how long the brokers keep its records.
// 0 means they keep them for ever (retention.ms = -1).
func TopicRetention(ctx context.Context, cl *kgo.Client, topic string) (time.Duration, error) {
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("kafka: describe %s: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return 0, fmt.Errorf("kafka: describe %s: %w", topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key != "retention.ms" {
			continue
		}
		ms, err := strconv.ParseInt(c.MaybeValue(), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("kafka: %s: retention.ms %q: %w", topic, c.MaybeValue(), err)
		}
		if ms < 0 {
			return 0, nil
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	return 0, fmt.Errorf("kafka: %s has no retention.ms", topic)
}

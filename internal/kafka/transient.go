package kafka

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/backflowhq/backflow/internal/retry"
)

// IsTransient reports whether err is a broker error that passes by itself, and so is retried
// rather than stopping a stage: a partition whose leader is moving or not known yet
// (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION right after a
// topic's creation), a coordinator loading, a request timed out (every error Kafka's protocol
// marks retriable), and a broker that cannot be reached (a connection refused or cut). It is
// the one decider for both clients: franz-go's errors (kerr) and sarama's (KError, mapped to
// the same codes). An auth or TLS error (IsAuthError) is never transient.
func IsTransient(err error) bool {
	if err == nil || IsAuthError(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if kerr.IsRetriable(err) {
		return true
	}
	var ke sarama.KError
	if errors.As(err, &ke) {
		return kerr.IsRetriable(kerr.ErrorForCode(int16(ke)))
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, sarama.ErrOutOfBrokers) || errors.Is(err, sarama.ErrNotConnected) ||
		errors.Is(err, sarama.ErrIncompleteResponse)
}

// transientPolicy is how a goka stage's offset and partition lookups are retried: a leader
// election takes about a second, a broker restart tens of seconds.
var transientPolicy = retry.Policy{Min: 200 * time.Millisecond, Max: 5 * time.Second}

// retryingTopicManager is goka's topic manager with its lookups retried while Kafka answers
// with a transient error (IsTransient). goka asks each table partition's leader for its
// offsets when a partition is assigned, and stops the processor on the first error: right
// after a table topic is created, while a leader moves, or while a broker restarts, that
// stopped the stage. Retries are logged and last until ctx ends or the manager is closed.
type retryingTopicManager struct {
	goka.TopicManager
	ctx    context.Context
	cancel context.CancelFunc
	log    *slog.Logger
}

// retryingTopicManagerBuilder wraps build's managers so that their lookups are retried until
// ctx ends (the stage stops) or goka closes the manager.
func retryingTopicManagerBuilder(ctx context.Context, log *slog.Logger, build goka.TopicManagerBuilder) goka.TopicManagerBuilder {
	if log == nil {
		log = slog.Default()
	}
	return func(brokers []string) (goka.TopicManager, error) {
		tm, err := build(brokers)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(ctx)
		return &retryingTopicManager{TopicManager: tm, ctx: ctx, cancel: cancel, log: log}, nil
	}
}

// GetOffset is the inner manager's, retried on transient errors.
func (m *retryingTopicManager) GetOffset(topic string, partition int32, at int64) (int64, error) {
	var off int64
	err := m.retry("offset lookup", topic, partition, func() (err error) {
		off, err = m.TopicManager.GetOffset(topic, partition, at)
		return err
	})
	return off, err
}

// Partitions is the inner manager's, retried on transient errors.
func (m *retryingTopicManager) Partitions(topic string) ([]int32, error) {
	var ps []int32
	err := m.retry("partition lookup", topic, -1, func() (err error) {
		ps, err = m.TopicManager.Partitions(topic)
		return err
	})
	return ps, err
}

// Close ends any retry in progress, then closes the inner manager.
func (m *retryingTopicManager) Close() error {
	m.cancel()
	return m.TopicManager.Close()
}

func (m *retryingTopicManager) retry(what, topic string, partition int32, fn func() error) error {
	return retry.Do(m.ctx, transientPolicy, IsTransient, func(err error, attempt int, wait time.Duration) {
		m.log.Warn("kafka: "+what+" failed, retrying", "topic", topic, "partition", partition,
			"attempt", attempt, "retry_in", wait.Round(time.Millisecond), "error", err)
	}, fn)
}

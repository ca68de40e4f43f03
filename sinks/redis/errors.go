package redis

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/backflowhq/backflow/internal/retry"
	"github.com/backflowhq/backflow/internal/secure"
)

// What a Redis error means is decided here, for the stage and the wiring alike:
//   - IsRetryable: an outage, which waiting fixes. At start-up OpenWaiting retries these and
//     fails at once on anything else (wrong credentials, a bad database number).
//   - IsAuthError: Redis refused who we are; at start-up the stage stops naming the settings.
//   - Mid-run a write is retried whatever its error (Pipeline.Retryable): only HSET and EXPIRE
//     of well-formed rows reach Redis, so an error there is an outage, a failover, or a
//     credential rotated under us, all fixed by waiting, and a record is never dropped.

// ErrClusterDown means a Redis Cluster answered but does not serve every slot (cluster_state
// is not ok): a master is down and its replica has not taken over yet. Waiting fixes it.
var ErrClusterDown = errors.New("redis: cluster_state is not ok (some slot has no master)")

// IsRetryable reports whether err is an outage of Redis, which waiting fixes: Redis did not
// answer (a network error, a connection closed on us), is still loading its data set, or is a
// Redis Cluster failing over (a slot without a master, or CLUSTERDOWN).
func IsRetryable(err error) bool {
	var nerr net.Error
	return errors.As(err, &nerr) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "LOADING") ||
		errors.Is(err, ErrClusterDown) || strings.Contains(err.Error(), "CLUSTERDOWN")
}

// IsAuthError reports whether err means Redis refused who we are (WRONGPASS, NOAUTH, NOPERM)
// or the TLS handshake failed. At start-up a stage stops on these with the settings to check;
// mid-run the writer retries them like an outage (an operator fixes the ACL, nothing is
// dropped).
func IsAuthError(err error) bool {
	return goredis.IsAuthError(err) || goredis.HasErrorPrefix(err, "NOPERM") || secure.IsTLSError(err)
}

// OpenWaiting is Open, retried with backoff while Redis cannot be reached (IsRetryable: an
// outage at start-up is waited out like one later on), until ctx ends. Any other answer fails
// at once. Each retry is logged on log.
func OpenWaiting(ctx context.Context, c Conn, log *slog.Logger) (goredis.UniversalClient, error) {
	var rdb goredis.UniversalClient
	err := retry.Do(ctx, retry.Policy{Min: time.Second, Max: 30 * time.Second}, IsRetryable, func(err error, attempt int, _ time.Duration) {
		log.Warn("redis unavailable; retrying", "attempt", attempt, "error", err)
	}, func() (err error) {
		rdb, err = Open(ctx, c)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rdb, nil
}

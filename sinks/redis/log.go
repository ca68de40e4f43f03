package redis

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// go-redis prints its own pool and dial messages ("redis: connection pool: failed to dial
// after 5 attempts ...") to stderr through the standard log package, in a format of its own,
// beside the process's structured lines. Open routes them to slog instead, at debug level with
// component=go-redis: the sink's own WARN lines already say when Redis cannot be reached.
var routeLogs sync.Once

func routeClientLogs() { routeLogs.Do(func() { goredis.SetLogger(clientLog{}) }) }

type clientLog struct{}

func (clientLog) Printf(ctx context.Context, format string, v ...any) {
	slog.Default().DebugContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}

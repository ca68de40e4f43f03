// Command backflow runs and operates the backflow pipeline: AI inference results and gateway
// logs from Kafka into ClickHouse and a feature store. See `backflow --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/backflowhq/backflow/internal/ops"
)

func main() {
	// GOGC=200 and a 256 MiB soft memory limit unless GOGC or GOMEMLIMIT is set (ops.TuneGC).
	ops.TuneGC(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, a second one ends the process at once (the default action).
	context.AfterFunc(ctx, stop)
	os.Exit(execute(ctx, os.Args[1:]))
}

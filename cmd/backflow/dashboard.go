package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/internal/alerts"
	"github.com/backflowhq/backflow/internal/dashboard"
	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

// dashboardLong is the dashboard command's --help text.
const dashboardLong = `dashboard serves a web page of what backflow sank into ClickHouse, with the same panels (and
the same SQL) as the Grafana dashboard in deploy/grafana: requests and errors per model, latency
percentiles, tokens per tenant and model, risk-hit rate, top categories and verdict mix, dead
letters per class and origin, sink throughput and freshness, and replay history. The page and
its charts are built into the binary (no CDN, no build step); it refreshes itself and has a
time-range selector.

A health strip on top shows the lag of each consumer group in --groups (asked of Kafka; a
group that no member reads is red while its topics have records or BackflowProcessDown fires,
whatever its lag), the dead letters in the range (from ClickHouse), and the moderation circuit
breaker, scraped from
the ingest stage's Prometheus endpoint at --breaker-metrics-url (gauge
backflow_moderation_breaker_state); without that URL, or when it does not answer, the breaker
shows as unknown. The same scrape shows a group table restore in progress (the
backflow_table_restore* gauges): records restored, to go, rate and time left, per partition. With prometheus.url (BACKFLOW_PROMETHEUS_URL; the local stack's env file
sets it) it also shows the alerts that Prometheus has firing, from deploy/prometheus/rules.yaml,
each with its severity and summary.

The page polls JSON endpoints that scripts can use too: /api/panels lists the panels,
/api/panels/<id>?range=30m (or ?from=&to= in Unix seconds) returns one panel's rows, and
/api/health the health strip; /healthz answers "ok".

Every route but /healthz asks for HTTP basic auth when a password is set: the variable
BACKFLOW_DASHBOARD_PASSWORD, or a file named by dashboard.password_file
(BACKFLOW_DASHBOARD_PASSWORD_FILE, --password-file; the secured local stack writes one); the
user is dashboard.user (default backflow). A password is never a flag. Without a password the
dashboard serves only on a loopback address: another address is refused unless
--insecure-no-auth (dashboard.insecure_no_auth) allows it. Scripts pass the same credentials
(curl -u backflow:"$(cat dashboard-password)" .../api/panels). It needs the tables of 'backflow
migrate': the panels read the rollups of migration 0015 and their day level of 0018 (0017 rolls
up the rows written before them), dlq_first of 0019 for the dead letters, and for the minutes
not rolled up yet the views of 0008, 0009 and 0014.
It runs until SIGINT or SIGTERM.`

func newDashboardCmd() *cobra.Command {
	var cfg dashboard.Config
	authFlags := &runFlags{paths: map[string]string{}} // the dashboard section's keys
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve the built-in dashboard: traffic, latency, tokens, moderation, dead letters, freshness, replays",
		Long:  dashboardLong,
		Example: `  backflow dashboard --env-file .stack/env
  (umask 077 && openssl rand -hex 16 >dashboard-password)
  BACKFLOW_DASHBOARD_PASSWORD_FILE=dashboard-password backflow dashboard --env-file .stack/env --addr 0.0.0.0:18400 --range 6h --breaker-metrics-url http://127.0.0.1:18410/metrics`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			all, err := pipelines.LoadCommand(configPath, os.Getenv, authFlags.overrides(cmd)...)
			if err != nil {
				return fmt.Errorf("%w: configuration: %w", errUsage, err)
			}
			cfg.Auth = all.Dashboard
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			if err := all.Conns.Require(pipelines.SystemClickHouse, pipelines.SystemKafka); err != nil {
				return fmt.Errorf("%w: configuration: %w", errUsage, err)
			}
			conn := all.Conns
			// Bind first: an address in use fails here, before anything says it serves.
			ln, err := net.Listen("tcp", cfg.Addr)
			if err != nil {
				return fmt.Errorf("dashboard: --addr %s cannot be bound: %w; stop what listens there, or choose another address with --addr", cfg.Addr, err)
			}
			defer ln.Close()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			db, err := chschema.Open(ctx, conn.ClickHouse)
			cancel()
			if err != nil {
				return err
			}
			defer db.Close()
			kc, err := conn.Kafka.NewClient()
			if err != nil {
				return fmt.Errorf("%w: kafka: %w", errUsage, err)
			}
			defer kc.Close()
			var prom *alerts.Client
			if conn.Prometheus.URL != "" {
				if prom, err = alerts.New(conn.Prometheus); err != nil {
					return fmt.Errorf("%w: %w", errUsage, err)
				}
			}
			srv, err := dashboard.New(cfg, dashboard.Deps{ClickHouse: db, Kafka: kadm.NewClient(kc), Alerts: prom, Logger: log})
			if err != nil {
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			log.Info("dashboard serving", "url", srv.URL(), "basic_auth", cfg.Auth.Password != "" || cfg.Auth.PasswordFile != "", "clickhouse", conn.ClickHouse.Endpoint(), "groups", cfg.Groups, "breaker_metrics_url", cfg.BreakerURL,
				"prometheus", conn.Prometheus.URL)
			fmt.Fprintf(cmd.OutOrStdout(), "dashboard: %s\n", srv.URL())
			return srv.Serve(cmd.Context(), ln)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Addr, "addr", dashboard.DefaultAddr, "host:port to serve the page on")
	durationVar(f, &cfg.Range, "range", 30*time.Minute, "time range the page opens with, as 30m, 6h or 7d (the page can change it)")
	durationVar(f, &cfg.Refresh, "refresh", 10*time.Second, "auto-refresh period the page opens with (the page can change it)")
	f.StringSliceVar(&cfg.Groups, "groups", dashboard.DefaultGroups, "consumer groups whose lag the health strip shows")
	f.StringVar(&cfg.BreakerURL, "breaker-metrics-url", "", "Prometheus /metrics URL of the ingest stage, for the moderation breaker and table restores (empty: breaker shown as unknown)")
	durationVar(f, &cfg.QueryTimeout, "query-timeout", 10*time.Second, "bound on one panel's query")
	for _, k := range pipelines.KeysUnder("dashboard") {
		_, key, _ := strings.Cut(k.Path, ".")
		authFlags.add(f, strings.ReplaceAll(key, "_", "-"), k)
	}
	return cmd
}

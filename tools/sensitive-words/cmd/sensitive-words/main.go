// Command sensitive-words is the sensitive-word service: it loads a TSV dictionary and answers
// batch checks of texts over HTTP (API: tools/sensitive-words). It reloads the dictionary on
// SIGHUP and when the file changes, and shuts down gracefully on SIGINT or SIGTERM.
//
//	sensitive-words --dictionary deploy/sensitive-words/sample.tsv [--addr 127.0.0.1:18090]
//	  [--token-file FILE] [--tls-cert-file server.crt --tls-key-file server.key]
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/backflowhq/backflow/tools/sensitive-words"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "sensitive-words:", err)
		os.Exit(1)
	}
}

// errUsage: the flags are wrong; flag has printed why.
var errUsage = errors.New("usage")

// run parses args, serves until ctx ends, then shuts the HTTP server down gracefully.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("sensitive-words", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg             sensitivewords.Config
		addr            = fs.String("addr", "127.0.0.1:18090", "listen address")
		tokenFile       = fs.String("token-file", "", "file holding the bearer token clients must send (default: no token)")
		tlsCertFile     = fs.String("tls-cert-file", "", "PEM server certificate; with --tls-key-file serves HTTPS (default: plain HTTP)")
		tlsKeyFile      = fs.String("tls-key-file", "", "PEM key of --tls-cert-file")
		logLevel        = fs.String("log-level", "info", "debug, info, warn or error")
		shutdownTimeout = fs.Duration("shutdown-timeout", 15*time.Second, "how long in-flight requests may take to finish on SIGINT/SIGTERM")
	)
	fs.StringVar(&cfg.DictionaryPath, "dictionary", "", "TSV dictionary file: word<TAB>category<TAB>weight (required)")
	fs.IntVar(&cfg.MaxItems, "max-items", sensitivewords.DefaultMaxItems, "most items per request (more: 413 too_many_items)")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", sensitivewords.DefaultMaxBodyBytes, "largest request body (more: 413 body_too_large)")
	fs.IntVar(&cfg.MaxHitsPerItem, "max-hits-per-item", sensitivewords.DefaultMaxHitsPerItem, "most hits listed per item (the score counts all)")
	fs.Float64Var(&cfg.BlockThreshold, "block-threshold", sensitivewords.DefaultBlockThreshold, "score from which the verdict is BLOCK")
	fs.Float64Var(&cfg.ReviewThreshold, "review-threshold", sensitivewords.DefaultReviewThreshold, "score from which the verdict is REVIEW")
	fs.DurationVar(&cfg.ReloadInterval, "reload-interval", sensitivewords.DefaultReloadInterval, "how often to look for a changed dictionary file; 0 turns polling off (SIGHUP still reloads)")
	fs.BoolVar(&cfg.TestFaults, "test-faults", false, "TESTS ONLY: enable fault injection (--fault-* and POST /debug/faults)")
	fs.DurationVar(&cfg.Faults.Latency, "fault-latency", 0, "with --test-faults: delay every /v1/check answer")
	fs.Float64Var(&cfg.Faults.ErrorRate, "fault-error-rate", 0, "with --test-faults: share of /v1/check answered 500/503")
	fs.Float64Var(&cfg.Faults.Rate429, "fault-429-rate", 0, "with --test-faults: share of /v1/check answered 429")
	fs.Float64Var(&cfg.Faults.WrongCountRate, "fault-wrong-count-rate", 0, "with --test-faults: share of answers missing their last item")
	fs.Float64Var(&cfg.Faults.WrongOrderRate, "fault-wrong-order-rate", 0, "with --test-faults: share of answers with the items reversed")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %q\n", fs.Args())
		fs.Usage()
		return errUsage
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg.Logger = logger
	if *tokenFile != "" {
		tok, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		if cfg.Token = strings.TrimSpace(string(tok)); cfg.Token == "" {
			return fmt.Errorf("--token-file: %s is empty", *tokenFile)
		}
	}
	if (*tlsCertFile == "") != (*tlsKeyFile == "") {
		return fmt.Errorf("--tls-cert-file and --tls-key-file go together")
	}
	var tlsCert tls.Certificate
	if *tlsCertFile != "" {
		c, err := tls.LoadX509KeyPair(*tlsCertFile, *tlsKeyFile)
		if err != nil {
			return fmt.Errorf("--tls-cert-file: %w", err)
		}
		tlsCert = c
	}
	poll := cfg.ReloadInterval > 0 // 0: only SIGHUP reloads (a negative value fails in New)

	s, err := sensitivewords.New(cfg)
	if err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if poll {
		go s.Watch(ctx)
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = s.Reload() // logged and counted by Reload
			}
		}
	}()

	srv := &http.Server{
		Addr:              *addr,
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if *tlsCertFile != "" {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{tlsCert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	useTLS := srv.TLSConfig != nil // Serve writes TLSConfig: decide before it starts
	go func() {
		if useTLS {
			served <- srv.ServeTLS(ln, "", "")
		} else {
			served <- srv.Serve(ln)
		}
	}()
	logger.Info("serving", "addr", ln.Addr().String(), "tls", useTLS, "token", cfg.Token != "", "test_faults", cfg.TestFaults)

	select {
	case err := <-served:
		return fmt.Errorf("serve %s: %w", *addr, err)
	case <-ctx.Done():
	}
	logger.Info("shutting down", "timeout", *shutdownTimeout)
	sctx, scancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped")
	return nil
}

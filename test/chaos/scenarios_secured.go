package chaos

// The secured stack's scenario (19): connected through SASL/TLS and passwords, a wrong secret per
// system failing fast, and no secret shown anywhere.
// The table of every scenario is scenarios.go.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// 19
func secured(ctx context.Context, r *Run) error {
	pl, err := r.StartPipeline(ctx, nil, nil)
	if err != nil {
		return err
	}
	if err := r.Load(ctx, r.Traffic(5), "").CaughtUp(ctx); err != nil {
		return err
	}
	r.Healed()
	secrets := r.secrets()
	if len(secrets) < 4 {
		return fmt.Errorf("found %d secrets of the secured stack, want at least 4", len(secrets))
	}
	// A wrong secret per system: each stage must stop by itself, at once, naming the system.
	for _, w := range []struct {
		system, variable, stages string
	}{
		{"kafka", "BACKFLOW_KAFKA_SASL_PASSWORD_FILE", "ingest"},
		{"registry", "BACKFLOW_REGISTRY_PASSWORD_FILE", "ingest"},
		{"clickhouse", "BACKFLOW_CLICKHOUSE_PASSWORD_FILE", "sink-clickhouse"},
		{"redis", "BACKFLOW_REDIS_PASSWORD_FILE", "sink-features"},
	} {
		bad := r.Dir + "/wrong-secret-" + w.system
		if err := os.WriteFile(bad, []byte("wrong-"+r.ID+"\n"), 0o600); err != nil {
			return err
		}
		cfg, err := r.Config("wrong-"+w.system, w.stages, nil)
		if err != nil {
			return err
		}
		p, err := r.Start("wrong-"+w.system, map[string]string{w.variable: bad}, "run", "--config", cfg)
		if err != nil {
			return err
		}
		start := time.Now()
		code, err := p.Wait(90 * time.Second)
		if err != nil {
			p.Kill()
		}
		log := p.Log()
		if code != 1 || !strings.Contains(log, "refused at start-up: "+w.system) {
			r.Fail("wrong %s secret: exit %d after %v, want 1 with \"refused at start-up: %s\":\n%s", w.system, code, time.Since(start), w.system, tail(log, 1500))
		} else {
			r.Note("wrong %s secret: exit 1 after %v, naming %s", w.system, time.Since(start).Round(100*time.Millisecond), w.system)
		}
		if strings.Contains(log, "wrong-"+r.ID) {
			r.Fail("the wrong %s secret is in the stage's log", w.system)
		}
	}
	// No secret in ps, logs or DLQ headers.
	leaks := 0
	for _, p := range []*Proc{pl.Ingest, pl.Sinks} {
		cmdline, _ := readFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid()))
		for name, s := range secrets {
			if strings.Contains(cmdline, s) || strings.Contains(p.Log(), s) {
				leaks++
				r.Fail("the %s secret is in %s's command line or log", name, p.Name)
			}
		}
	}
	headers, err := r.dlqHeaders(ctx)
	if err != nil {
		return err
	}
	for name, s := range secrets {
		if strings.Contains(headers, s) {
			leaks++
			r.Fail("the %s secret is in a DLQ header", name)
		}
	}
	r.Note("%d secrets checked against the stages' command lines, logs and %d bytes of DLQ headers: %d leaks", len(secrets), len(headers), leaks)
	return nil
}

// secrets reads the secured stack's secrets from the files its env names.
func (r *Run) secrets() map[string]string {
	out := map[string]string{}
	for k, v := range r.Stack {
		if strings.HasSuffix(k, "_PASSWORD_FILE") || strings.HasSuffix(k, "_TOKEN_FILE") {
			if b, err := readFile(v); err == nil && strings.TrimSpace(b) != "" {
				out[k] = strings.TrimSpace(b)
			}
		}
	}
	return out
}

// dlqHeaders reads every header of every DLQ entry, as one string.
func (r *Run) dlqHeaders(ctx context.Context) (string, error) {
	n, err := r.ends(ctx, r.DLQ)
	if err != nil || n == 0 {
		return "", err
	}
	cl, err := r.Kafka.NewClient(kgo.ConsumeTopics(r.DLQ), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	var b strings.Builder
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for read := int64(0); read < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return "", fmt.Errorf("read %d of %d DLQ entries", read, n)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			read++
			for _, h := range rec.Headers {
				b.WriteString(h.Key + "=" + string(h.Value) + "\n")
			}
		})
	}
	return b.String(), nil
}

package pipelines

// A check of a binary protocol (Kafka, ClickHouse's native protocol, Redis) pointed at another
// kind of service does not fail: the other service waits for a request it can read, and the
// check for an answer, until the timeout. So a check that has not answered within probeGrace,
// or that failed, has its address probed with one HTTP request line, which an HTTP server and
// Redis answer at once, each in its own way; the check then fails with ErrMisaddressed, naming
// what answers and the variable to fix, instead of timing out as DOWN.

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// probeGrace is how long a check may go unanswered before its address is probed: a server of
// the right kind answers in milliseconds.
const probeGrace = 750 * time.Millisecond

// probeTimeout bounds one probe.
const probeTimeout = 2 * time.Second

// probeTarget is the address the probe asks for system: the first of its addresses, or ""
// when it is not probed (an HTTP system, whose check fails fast on its own, or TLS, which the
// plain probe cannot speak).
func probeTarget(c Conns, system string) string {
	first := func(s string) string { f, _, _ := strings.Cut(s, ","); return f }
	switch {
	case system == SystemKafka && !c.Kafka.TLS.On():
		return first(c.Kafka.Endpoint())
	case system == SystemClickHouse && !c.ClickHouse.TLS.On():
		return c.ClickHouse.Endpoint()
	case system == SystemRedis && !c.Redis.TLS.On():
		return first(c.Redis.Endpoint())
	}
	return ""
}

// identify sends addr one request line, "GET / HTTP/1.0", and says what answered: "an HTTP
// server" for an HTTP status line (ClickHouse's HTTP interface, a registry, any web server),
// "Redis" for a RESP error or status (Redis reads the line as a GET with two arguments). A
// Kafka broker closes the connection and ClickHouse's native protocol answers with an
// exception packet, which say nothing: "".
func identify(ctx context.Context, addr string) string {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return ""
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		return ""
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return ""
	}
	switch head := string(buf); {
	case head == "HTTP/":
		return "an HTTP server"
	case head[0] == '-' || head[0] == '+':
		return "Redis"
	}
	return ""
}

// misaddressedHint is the error for system at addr, where other answered.
func misaddressedHint(system, addr, other string) error {
	hint := ""
	switch {
	case system == SystemClickHouse && other == "an HTTP server":
		hint = "; this looks like ClickHouse's HTTP port (8123 on a stock server): backflow speaks the native protocol (9000 on a stock server)"
	case system == SystemRedis && other == "an HTTP server":
		hint = "; Redis speaks RESP, on 6379 on a stock server"
	}
	return fmt.Errorf("%w: %s: %s answers as %s, not as %s%s: check %s", ErrMisaddressed, system, addr, other, system, hint, addressOf(system))
}

// checkAddressed runs one system's check; when the check has not answered within probeGrace,
// or failed, it probes the system's address (identify) and fails with ErrMisaddressed if
// another kind of service answers there, without waiting for the check.
func checkAddressed(ctx context.Context, c Conns, system string, run func(context.Context) (string, error)) (string, error) {
	addr := probeTarget(c, system)
	if addr == "" {
		return run(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		detail string
		err    error
	}
	done := make(chan answer, 1) // the check ends on cancel, after a misaddressed return
	go func() {
		d, err := run(ctx)
		done <- answer{d, err}
	}()
	grace := time.NewTimer(probeGrace)
	defer grace.Stop()
	select {
	case a := <-done:
		if a.err == nil {
			return a.detail, nil
		}
		if other := identify(ctx, addr); other != "" && other != kindOf[system] {
			return "", misaddressedHint(system, addr, other)
		}
		return a.detail, a.err
	case <-grace.C:
	}
	if other := identify(ctx, addr); other != "" && other != kindOf[system] {
		return "", misaddressedHint(system, addr, other)
	}
	a := <-done
	return a.detail, a.err
}

// kindOf is what identify calls each probed system when it answers as itself.
var kindOf = map[string]string{SystemRedis: "Redis"}

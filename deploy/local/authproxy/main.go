// Command authproxy puts HTTP basic auth (and, optionally, bearer tokens) and TLS in front of a
// plain HTTP service on loopback.
// The secured local stack (deploy/local/stack up --secure) runs it in front of the schema
// registry: Apicurio 2.4 can only authenticate through Keycloak, which the stack cannot run,
// and backflow speaks basic auth to any Confluent-API registry.
//
//	authproxy --listen 127.0.0.1:18083 --upstream http://127.0.0.1:18084 \
//	  --tls-cert-file server.crt --tls-key-file server.key --credentials-file registry.credentials
//
// The credentials file holds one "user:password" line per user (read at start and on SIGHUP),
// so no password is ever on a command line. A request without valid credentials is answered
// 401 with a WWW-Authenticate header and a Confluent-style JSON error, and never reaches the
// upstream; the Authorization header is removed before forwarding.
//
// With --oidc-issuer and --oidc-audience it also takes "Authorization: Bearer <JWT>": a token
// signed by a key of the issuer's JWKS (fetched from <issuer>/jwks when first needed), issued
// by it, for the audience, and not expired. The secured stack's OIDC test server issues them
// (deploy/local/lib/oauth.sh), so backflow's registry token login is tested against a real
// token issuer.
package main

import (
	"bufio"
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "authproxy:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("authproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:18083", "address to serve on")
	upstream := fs.String("upstream", "", "base URL of the plain HTTP service to forward to (required)")
	certFile := fs.String("tls-cert-file", "", "PEM server certificate; with --tls-key-file serves HTTPS (default: plain HTTP)")
	keyFile := fs.String("tls-key-file", "", "PEM key of the certificate")
	credFile := fs.String("credentials-file", "", "file of user:password lines (required)")
	issuer := fs.String("oidc-issuer", "", "also accept bearer tokens issued by this OIDC issuer URL (keys from <issuer>/jwks)")
	audience := fs.String("oidc-audience", "", "the audience a bearer token must carry (with --oidc-issuer)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *upstream == "" || *credFile == "" {
		return errors.New("--upstream and --credentials-file are required")
	}
	if (*certFile == "") != (*keyFile == "") {
		return errors.New("--tls-cert-file and --tls-key-file go together")
	}
	if (*issuer == "") != (*audience == "") {
		return errors.New("--oidc-issuer and --oidc-audience go together")
	}
	up, err := url.Parse(*upstream)
	if err != nil || up.Scheme != "http" || up.Host == "" {
		return fmt.Errorf("--upstream: %q is not an http:// URL", *upstream)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	creds := &credentials{path: *credFile}
	if err := creds.load(); err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			if err := creds.load(); err != nil {
				log.Warn("reloading credentials failed; keeping the old ones", "error", err)
			} else {
				log.Info("credentials reloaded")
			}
		}
	}()

	var tokens *oidc.IDTokenVerifier
	if *issuer != "" {
		keys := oidc.NewRemoteKeySet(ctx, strings.TrimSuffix(*issuer, "/")+"/jwks")
		tokens = oidc.NewVerifier(*issuer, keys, &oidc.Config{ClientID: *audience})
	}
	srv := &http.Server{Handler: newHandler(up, creds, tokens, log), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() {
		if *certFile != "" {
			served <- srv.ServeTLS(ln, *certFile, *keyFile)
		} else {
			served <- srv.Serve(ln)
		}
	}()
	log.Info("serving", "addr", ln.Addr().String(), "upstream", up.String(), "tls", *certFile != "", "users", creds.count(), "oidc_issuer", *issuer)
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// credentials are the user:password pairs of the credentials file.
type credentials struct {
	path  string
	mu    sync.RWMutex
	users map[string]string
}

func (c *credentials) load() error {
	f, err := os.Open(c.path)
	if err != nil {
		return fmt.Errorf("--credentials-file: %w", err)
	}
	defer f.Close()
	users := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, pass, ok := strings.Cut(line, ":")
		if !ok || user == "" || pass == "" {
			return fmt.Errorf("--credentials-file: %s line %d: want user:password", c.path, n)
		}
		users[user] = pass
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("--credentials-file: %w", err)
	}
	if len(users) == 0 {
		return fmt.Errorf("--credentials-file: %s has no user", c.path)
	}
	c.mu.Lock()
	c.users = users
	c.mu.Unlock()
	return nil
}

func (c *credentials) count() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.users)
}

// valid compares in constant time, whatever the user.
func (c *credentials) valid(user, pass string) bool {
	c.mu.RLock()
	want, ok := c.users[user]
	c.mu.RUnlock()
	if !ok {
		want = "\x00no such user" // still compare, so timing does not tell users apart
	}
	return subtle.ConstantTimeCompare([]byte(pass), []byte(want)) == 1 && ok
}

// newHandler forwards to up the requests with valid basic credentials or, when tokens is set,
// a bearer token it verifies.
func newHandler(up *url.URL, creds *credentials, tokens *oidc.IDTokenVerifier, log *slog.Logger) http.Handler {
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(up)
			r.SetXForwarded()
			r.Out.Header.Del("Authorization")
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("upstream unreachable", "error", err)
			writeError(w, http.StatusBadGateway, 50201, "upstream unreachable")
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && tokens != nil {
			if _, err := tokens.Verify(r.Context(), strings.TrimSpace(bearer)); err != nil {
				log.Info("bearer token refused", "error", err)
				w.Header().Set("WWW-Authenticate", `Bearer realm="backflow registry", error="invalid_token"`)
				writeError(w, http.StatusUnauthorized, 40101, "invalid bearer token: "+err.Error())
				return
			}
			proxy.ServeHTTP(w, r)
			return
		}
		user, pass, ok := r.BasicAuth()
		if !ok || !creds.valid(user, pass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="backflow registry"`)
			writeError(w, http.StatusUnauthorized, 40101, "missing or wrong credentials")
			return
		}
		proxy.ServeHTTP(w, r)
	})
}

func writeError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error_code":%d,"message":%q}`, code, msg)
}

package pipelines

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/moderation"
	sensitivewords "github.com/backflowhq/backflow/tools/sensitive-words"
)

// TestPreflight: a registry and a sensitive-word service that refuse our credentials stop
// start-up with ErrRefused, naming each system and the settings to check, without the
// secret; a system that is merely down (a closed port) is reported in the results but does
// not stop it.
func TestPreflight(t *testing.T) {
	reg := srfake.New(srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("backflow:right-pass"))))
	defer reg.Close()
	svc, err := sensitivewords.New(sensitivewords.Config{DictionaryPath: filepath.Join("..", "deploy", "sensitive-words", "sample.tsv"),
		Token: "tok-right", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(svc.Handler())
	defer hs.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	ctx := context.Background()

	bad := Conns{
		Registry:       avro.RegistryConn{URL: reg.URL(), Username: "backflow", Password: "wrong-pass"},
		SensitiveWords: moderation.Conn{URL: hs.URL, Token: "tok-wrong"},
	}
	bad.Redis.Addr = closed
	results, err := Preflight(ctx, bad, 10*time.Second, SystemRegistry, SystemSensitiveWords, SystemRedis)
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("Preflight = %v, want ErrRefused", err)
	}
	for _, want := range []string{"registry at " + reg.URL(), "BACKFLOW_REGISTRY_PASSWORD[_FILE]", "sensitive-words at " + hs.URL, "BACKFLOW_SENSITIVE_WORDS_TOKEN[_FILE]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "redis") {
		t.Errorf("a closed Redis port counted as a refusal: %v", err)
	}
	for _, secret := range []string{"wrong-pass", "tok-wrong", "right-pass", "tok-right"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error shows %q: %v", secret, err)
		}
	}
	if len(results) != 3 || results[2].System != SystemRedis || results[2].Err == nil {
		t.Fatalf("results = %+v, want redis last with its error", results)
	}

	good := bad
	good.Registry.Password, good.SensitiveWords.Token = "right-pass", "tok-right"
	results, err = Preflight(ctx, good, 10*time.Second, SystemRegistry, SystemSensitiveWords, SystemRedis)
	if err != nil {
		t.Fatalf("Preflight with the right secrets and Redis down: %v", err)
	}
	if results[0].Err != nil || results[1].Err != nil || results[2].Err == nil {
		t.Fatalf("results = %+v, want registry and service ok, redis down", results)
	}
}

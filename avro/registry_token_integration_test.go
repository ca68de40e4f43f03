package avro_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/secure"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestRegistryBearerTokenOnTheStack: the secured stack's registry takes bearer tokens of
// audience "registry" from the stack's OIDC test server. A token for another audience and an
// expired one are refused as auth errors; a token for the registry, rotated into the same token
// file, is used by the same client at its next request.
func TestRegistryBearerTokenOnTheStack(t *testing.T) {
	vals := testenv.Secure(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	token := func(scope string) string { return testenv.OAuthToken(t, scope) }
	file := filepath.Join(t.TempDir(), "registry-token")
	put := func(tok string) { testenv.WriteTokenFile(t, file, tok) }
	put(token("kafka")) // another audience
	cl, err := avro.NewRegistryClient(avro.RegistryConn{URL: vals["BACKFLOW_REGISTRY_URL"], TokenFile: file,
		TLS: secure.TLS{CAFile: vals["BACKFLOW_REGISTRY_TLS_CA_FILE"]}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, token string }{{"another audience", token("kafka")}, {"expired", token("kafka-expired")}} {
		put(c.token)
		err := avro.PingRegistry(ctx, cl)
		if !avro.IsAuthError(err) {
			t.Fatalf("%s token: %v, want an auth error", c.name, err)
		}
		if strings.Contains(err.Error(), c.token) {
			t.Fatalf("the error shows the token: %v", err)
		}
	}
	put(token("registry"))
	if err := avro.PingRegistry(ctx, cl); err != nil {
		t.Fatalf("a token for the registry, rotated into the file: %v", err)
	}
	if _, err := cl.Subjects(ctx); err != nil {
		t.Fatalf("list subjects with the token: %v", err)
	}
}

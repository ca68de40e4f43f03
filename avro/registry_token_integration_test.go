package avro_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2/clientcredentials"

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
	tokenURL := vals["BACKFLOW_OAUTH_TOKEN_URL"]
	if tokenURL == "" {
		t.Fatal("the secured stack's env file has no BACKFLOW_OAUTH_TOKEN_URL: restart it with this checkout's deploy/local/stack --secure up")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	token := func(scope string) string {
		cc := clientcredentials.Config{ClientID: "backflow", ClientSecret: "any-secret", TokenURL: tokenURL, Scopes: []string{scope}}
		tok, err := cc.Token(ctx)
		if err != nil {
			t.Fatalf("token for scope %s: %v", scope, err)
		}
		return tok.AccessToken
	}
	file := filepath.Join(t.TempDir(), "registry-token")
	put := func(tok string) {
		if err := os.WriteFile(file+".tmp", []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(file+".tmp", file); err != nil {
			t.Fatal(err)
		}
	}
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

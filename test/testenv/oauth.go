package testenv

import (
	"context"
	"os"
	"testing"

	"golang.org/x/oauth2/clientcredentials"
)

// The secured stack's OIDC test server (deploy/local/lib/oauth.sh) issues a token to any client
// id and secret, with the scope asked for as its audience: "kafka" for the brokers, "registry"
// for the registry's proxy, "kafka-expired" for one that expired long ago.

// OAuthToken is a token for scope from the secured stack's token endpoint, got as a platform
// would (client credentials).
func OAuthToken(t testing.TB, scope string) string {
	t.Helper()
	url := Secure(t)["BACKFLOW_OAUTH_TOKEN_URL"]
	if url == "" {
		t.Fatal("the secured stack's env file has no BACKFLOW_OAUTH_TOKEN_URL: restart it with this checkout's deploy/local/stack --secure up")
	}
	cc := clientcredentials.Config{ClientID: "backflow", ClientSecret: "any-secret", TokenURL: url, Scopes: []string{scope}}
	tok, err := cc.Token(context.Background())
	if err != nil {
		t.Fatalf("token for scope %s: %v", scope, err)
	}
	return tok.AccessToken
}

// WriteTokenFile puts tok in the token file at path as a platform rotates one: written
// beside it, then renamed over it, so no reader sees half a token.
func WriteTokenFile(t testing.TB, path, tok string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// TestHandler: only a known user with its password reaches the upstream, which never sees
// the Authorization header; everything else is 401 with WWW-Authenticate.
func TestHandler(t *testing.T) {
	var reached int
	var sawAuth string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		sawAuth = r.Header.Get("Authorization")
		io.WriteString(w, `["subject-a"]`)
	}))
	defer up.Close()
	path := filepath.Join(t.TempDir(), "creds")
	if err := os.WriteFile(path, []byte("# users\nbackflow:s3cret\nother:pw2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	creds := &credentials{path: path}
	if err := creds.load(); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	srv := httptest.NewServer(newHandler(u, creds, nil, slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer srv.Close()
	for _, tt := range []struct {
		name       string
		user, pass string
		want       int
	}{
		{"right", "backflow", "s3cret", 200},
		{"second user", "other", "pw2", 200},
		{"wrong password", "backflow", "nope", 401},
		{"other user's password", "other", "s3cret", 401},
		{"unknown user", "nobody", "s3cret", 401},
		{"none", "", "", 401},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := reached
			req, _ := http.NewRequest("GET", srv.URL+"/apis/ccompat/v7/subjects", nil)
			if tt.user != "" {
				req.SetBasicAuth(tt.user, tt.pass)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
			if got := reached - before; (tt.want == 200) != (got == 1) {
				t.Fatalf("upstream reached %d times", got)
			}
			if tt.want == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
			if sawAuth != "" {
				t.Fatalf("upstream saw Authorization %q", sawAuth)
			}
		})
	}
}

func TestCredentialsFileErrors(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"empty": "", "no colon": "backflow\n", "no password": "backflow:\n"} {
		path := filepath.Join(dir, name)
		os.WriteFile(path, []byte(content), 0o600)
		if err := (&credentials{path: path}).load(); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

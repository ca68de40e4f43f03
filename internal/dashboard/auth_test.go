package dashboard

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/internal/conf"
)

// fakeConn stands in for ClickHouse on routes that do not query it (a call would panic).
type fakeConn struct{ driver.Conn }

// TestAuthValidate: an address other than loopback needs a password or the explicit
// insecure_no_auth; loopback needs neither; each error names its field.
func TestAuthValidate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg   Config
		field string // "" for valid
	}{
		{Config{}, ""},
		{Config{Addr: "127.0.0.1:18400"}, ""},
		{Config{Addr: "[::1]:18400"}, ""},
		{Config{Addr: "localhost:18400"}, ""},
		{Config{Addr: "0.0.0.0:18400"}, "Auth"},
		{Config{Addr: ":18400"}, "Auth"},
		{Config{Addr: "10.1.2.3:18400"}, "Auth"},
		{Config{Addr: "0.0.0.0:18400", Auth: Auth{InsecureNoAuth: true}}, ""},
		{Config{Addr: "0.0.0.0:18400", Auth: Auth{User: "ops", Password: "pw"}}, ""},
		{Config{Addr: "0.0.0.0:18400", Auth: Auth{User: "ops", PasswordFile: file}}, ""},
		{Config{Auth: Auth{Password: "pw"}}, "User"},
		{Config{Auth: Auth{User: "ops", Password: "pw", PasswordFile: file}}, "PasswordFile"},
		{Config{Auth: Auth{User: "ops", PasswordFile: filepath.Join(t.TempDir(), "missing")}}, "PasswordFile"},
		{Config{Auth: Auth{User: "ops", Password: "pw", InsecureNoAuth: true}}, "InsecureNoAuth"},
	} {
		err := c.cfg.Validate()
		var fe *conf.FieldError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s %+v: %v, want valid", c.cfg.Addr, c.cfg.Auth, err)
		case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field):
			t.Errorf("%s %+v: %v, want an error on field %s", c.cfg.Addr, c.cfg.Auth, err, c.field)
		case c.field == "Auth" && !errors.Is(err, ErrNoAuth):
			t.Errorf("%s: %v, want ErrNoAuth", c.cfg.Addr, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the password: %v", c.cfg.Addr, err)
		}
	}
}

// TestBasicAuth drives the server's handler: without credentials, with a wrong user or
// password, every route but /healthz is 401 with a challenge; with them it is served.
func TestBasicAuth(t *testing.T) {
	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Addr: "0.0.0.0:18400", Auth: Auth{User: "ops", PasswordFile: file}}, Deps{ClickHouse: fakeConn{}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, user, password string, withAuth bool) *http.Response {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if withAuth {
			req.SetBasicAuth(user, password)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return rec.Result()
	}
	routes := []string{"/", "/index.html", "/app.js", "/api/panels", "/api/health", "/api/panels/nope"}
	for _, path := range routes {
		for _, c := range []struct {
			name           string
			user, password string
			withAuth       bool
		}{{"none", "", "", false}, {"wrong password", "ops", "s3cret2", true}, {"wrong user", "op", "s3cret", true},
			{"empty", "", "", true}, {"password with newline", "ops", "s3cret\n", true}} {
			resp := get(path, c.user, c.password, c.withAuth)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), `Basic realm="backflow dashboard"`) {
				t.Errorf("%s, %s: %d %q, want 401 with a Basic challenge", path, c.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
			if strings.Contains(string(body), "panel") || strings.Contains(string(body), "s3cret") {
				t.Errorf("%s, %s: the 401 shows %q", path, c.name, body)
			}
		}
	}
	want := map[string]int{"/": 200, "/api/panels": 200, "/api/panels/nope": 404}
	for path, code := range want {
		resp := get(path, "ops", "s3cret", true)
		if resp.StatusCode != code || resp.Header.Get("WWW-Authenticate") != "" {
			t.Errorf("%s with the credentials: %d, want %d", path, resp.StatusCode, code)
		}
	}
	var l struct{ Panels []PanelInfo }
	resp := get("/api/panels", "ops", "s3cret", true)
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || len(l.Panels) != len(Panels) {
		t.Errorf("/api/panels: %d panels (%v), want %d", len(l.Panels), err, len(Panels))
	}
	if resp := get("/healthz", "", "", false); resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz without credentials: %d, want 200", resp.StatusCode)
	}
}

// TestNoAuthOnLoopback: without a password the routes are served as before.
func TestNoAuthOnLoopback(t *testing.T) {
	s, err := New(Config{}, Deps{ClickHouse: fakeConn{}})
	if err != nil {
		t.Fatal(err)
	}
	for path, code := range map[string]int{"/": 200, "/api/panels": 200, "/healthz": 200} {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != code {
			t.Errorf("%s: %d, want %d", path, rec.Code, code)
		}
	}
}

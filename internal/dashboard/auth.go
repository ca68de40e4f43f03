package dashboard

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/secure"
)

// Auth is the dashboard's HTTP basic auth: the keys of the config file's dashboard section.
// With a password (BACKFLOW_DASHBOARD_PASSWORD, or the file PasswordFile names) every route but
// /healthz asks for User and the password. Without one the dashboard serves only on a loopback
// address, unless InsecureNoAuth says otherwise.
type Auth struct {
	// User is the basic-auth user name. Default: backflow.
	User string `key:"user" default:"backflow" doc:"user name the dashboard's HTTP basic auth asks for"`
	// Password is the basic-auth password. It comes from the environment or PasswordFile,
	// never a flag or a config file.
	Password string `doc:"the dashboard's basic-auth password"`
	// PasswordFile is a file holding the password (trailing newline ignored), read when the
	// server starts. Set Password or PasswordFile, not both.
	PasswordFile string `key:"password_file" secret:"Password" doc:"file holding the dashboard's basic-auth password; with it every route but /healthz asks for the user and password"`
	// InsecureNoAuth allows serving without a password on an address other than loopback.
	InsecureNoAuth bool `key:"insecure_no_auth" doc:"serve without a password on an address other than loopback (tenants, models, token counts and dead letters are then open to anyone reaching the port)"`
}

// ErrNoAuth is Config.Validate's error for a non-loopback address without a password.
var ErrNoAuth = errors.New("no password set for an address other than loopback")

// password reads the password, or "" when none is set.
func (a Auth) password() (string, error) {
	return secure.ReadSecret("password", a.Password, a.PasswordFile)
}

// Validate reports every bad field, each a conf.FieldError naming the field (never the
// password).
func (a Auth) Validate() error {
	var errs []error
	pw, err := a.password()
	if err != nil {
		errs = append(errs, conf.Field("PasswordFile", err))
	}
	if pw != "" && a.User == "" {
		errs = append(errs, conf.Errorf("User", "user: empty while a password is set"))
	}
	if pw != "" && a.InsecureNoAuth {
		errs = append(errs, conf.Errorf("InsecureNoAuth", "insecure no auth: set while a password is set; unset one"))
	}
	return conf.Nest("", "dashboard: ", errors.Join(errs...))
}

// IsLoopback reports whether the host of addr (host:port) is a loopback address or localhost;
// an empty host (all interfaces) is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// basicAuth lets a request through to next only with the user and password; others get 401
// with a WWW-Authenticate challenge. Both are compared in constant time, as their SHA-256
// digests so that their lengths do not show either.
func basicAuth(user, password string, next http.Handler) http.Handler {
	wantUser, wantPassword := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		gotUser, gotPassword := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		userOK := subtle.ConstantTimeCompare(gotUser[:], wantUser[:])
		passwordOK := subtle.ConstantTimeCompare(gotPassword[:], wantPassword[:])
		if ok && userOK&passwordOK == 1 {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="backflow dashboard", charset="UTF-8"`)
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, fmt.Sprintf("%d unauthorized: the dashboard asks for its user and password", http.StatusUnauthorized), http.StatusUnauthorized)
	})
}

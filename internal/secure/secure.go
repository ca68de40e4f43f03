// Package secure holds the two pieces every connection config shares for authenticated,
// encrypted connections: TLS (client-side TLS settings, turned into a *tls.Config) and Secret
// (a credential given inline or as a file). Start with TLS.
//
// Secrets never come from flags: a flag shows in ps. They come from an environment variable or
// from a file (Kubernetes Secret volumes, Docker secrets, the local stack's .stack/secure/),
// and a config file names only the file (`password_file`), never the secret itself.
package secure

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/backflowhq/backflow/internal/conf"
)

// TLS says how a client encrypts its connection and checks the server: the one declaration of
// the TLS keys every connection section has (kafka, registry, clickhouse, redis, sensitive).
// The zero value means plaintext.
type TLS struct {
	// Enabled turns TLS on, checking the server against the system's root CAs unless CAFile
	// is set. Setting any other field turns TLS on as well.
	Enabled bool `key:"tls" doc:"TLS with the system's roots (implied by any other tls_ key)"`
	// CAFile is a PEM file of the CA certificates that sign the server's certificate; they
	// replace the system roots. Default: none (the system roots).
	CAFile string `key:"tls_ca_file" doc:"PEM file of the CA that signed the server's certificate"`
	// CertFile and KeyFile are a PEM client certificate and its key, for servers that ask
	// for one (mutual TLS). Both or neither.
	CertFile string `key:"tls_cert_file" doc:"PEM client certificate, for a server that asks for one"`
	KeyFile  string `key:"tls_key_file" doc:"PEM key of the client certificate"`
	// ServerName is the name the server's certificate must carry. Default: the host of the
	// address dialled.
	ServerName string `key:"tls_server_name" doc:"name to verify the server's certificate against; empty: the host of the address"`
}

// On reports whether TLS is used.
func (t TLS) On() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != ""
}

// Validate loads the files and reports every problem, each a conf.FieldError naming its field.
// Messages start with "tls": the caller puts its own name in front (conf.Nest). A TLS that is
// not On is valid.
func (t TLS) Validate() error {
	_, err := t.Config()
	return err
}

// Config returns the *tls.Config for t, or nil when t is not On. Files are read now, so a
// certificate replaced on disk is picked up by the next client built. The minimum version is
// TLS 1.2. Errors are as Validate's.
func (t TLS) Config() (*tls.Config, error) {
	if !t.On() {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	var errs []error
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		pool := x509.NewCertPool()
		switch {
		case err != nil:
			errs = append(errs, conf.Errorf("CAFile", "tls ca file: %w", err))
		case !pool.AppendCertsFromPEM(pem):
			errs = append(errs, conf.Errorf("CAFile", "tls ca file: %s holds no PEM certificate", t.CAFile))
		default:
			c.RootCAs = pool
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			errs = append(errs, conf.Errorf("CertFile", "tls client certificate: %w", err))
		}
		c.Certificates = []tls.Certificate{cert}
	case t.CertFile != "":
		errs = append(errs, conf.Errorf("CertFile", "tls key file: empty while cert file is set"))
	case t.KeyFile != "":
		errs = append(errs, conf.Errorf("KeyFile", "tls cert file: empty while key file is set"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// ReadSecret returns the secret given inline, or else the content of file (without its
// trailing newline), or "" when neither is set. Setting both is an error: one would silently
// win. field names the setting in errors (e.g. "kafka: sasl password"); an error never
// shows the secret.
func ReadSecret(field, inline, file string) (string, error) {
	switch {
	case inline != "" && file != "":
		return "", fmt.Errorf("%s: set inline and as a file (%s); set one", field, file)
	case file == "":
		return inline, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s file: %w", field, err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s file: %s is empty", field, file)
	}
	return s, nil
}

// IsTLSError reports whether err is a TLS failure that no retry fixes: the server's
// certificate is not trusted or names another host, the server does not speak TLS, or it
// refused the handshake (for example our client certificate). These are configuration
// errors: at start-up a stage stops on them instead of retrying.
func IsTLSError(err error) bool {
	if err == nil {
		return false
	}
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verify           *tls.CertificateVerificationError
		header           tls.RecordHeaderError
		alert            tls.AlertError
	)
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &header) || errors.As(err, &alert) ||
		// Some clients flatten the error to a string (redis, clickhouse-go's wrapping).
		strings.Contains(err.Error(), "tls: ") || strings.Contains(err.Error(), "x509: ")
}

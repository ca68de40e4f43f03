package kafka

import (
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"hash"
	"net/http"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/xdg-go/scram"
	"golang.org/x/oauth2"

	"github.com/backflowhq/backflow/internal/secure"
)

// sarama has no SCRAM implementation of its own; it takes one through SCRAMClient. This is
// the adapter its documentation suggests, over github.com/xdg-go/scram.

var (
	scramSHA256 scram.HashGeneratorFcn = func() hash.Hash { return sha256.New() }
	scramSHA512 scram.HashGeneratorFcn = func() hash.Hash { return sha512.New() }
)

type scramClient struct {
	gen  scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func newSCRAMClient(gen scram.HashGeneratorFcn) *scramClient { return &scramClient{gen: gen} }

func (c *scramClient) Begin(user, password, authzID string) error {
	cl, err := c.gen.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conv = cl.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }

func (c *scramClient) Done() bool { return c.conv.Done() }

// IsAuthError reports whether err means the cluster refused who we are, or our TLS setup:
// SASL authentication failed (wrong user or password, unknown mechanism, an OAUTHBEARER token
// the brokers reject: expired, another audience, an unknown signing key), an ACL denies the
// cluster, a topic or the group, the TLS handshake failed (untrusted certificate, a
// plaintext listener), the token endpoint refused our client (HTTP 400, 401 or 403: an
// unknown client, a wrong secret or scope), or the token file holds an expired token. No retry fixes these: at start-up a stage stops on them with the
// settings to check, rather than retrying forever.
func IsAuthError(err error) bool {
	return errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.UnsupportedSaslMechanism) ||
		errors.Is(err, kerr.IllegalSaslState) || errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, sarama.ErrSASLAuthenticationFailed) ||
		errors.Is(err, ErrTokenExpired) || isTokenEndpointRefusal(err) || secure.IsTLSError(err)
}

// isTokenEndpointRefusal reports whether the token endpoint answered that it will not issue a
// token to us (RFC 6749 5.2: invalid_client, unauthorized_client, invalid_scope come as 400
// or 401). A 5xx is an outage, retried like one.
func isTokenEndpointRefusal(err error) bool {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.Response == nil {
		return false
	}
	c := re.Response.StatusCode
	return c == http.StatusBadRequest || c == http.StatusUnauthorized || c == http.StatusForbidden
}

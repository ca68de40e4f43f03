package kafka

import (
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"hash"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/xdg-go/scram"

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
// SASL authentication failed (wrong user or password, unknown mechanism), an ACL denies the
// cluster, a topic or the group, or the TLS handshake failed (untrusted certificate, a
// plaintext listener). No retry fixes these: at start-up a stage stops on them with the
// settings to check, rather than retrying forever.
func IsAuthError(err error) bool {
	return errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.UnsupportedSaslMechanism) ||
		errors.Is(err, kerr.IllegalSaslState) || errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || secure.IsTLSError(err)
}

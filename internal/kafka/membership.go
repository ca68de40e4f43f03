package kafka

import (
	"fmt"
	"regexp"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Session timeouts Conn.SessionTimeout accepts: the brokers' defaults of
// group.min.session.timeout.ms and group.max.session.timeout.ms.
const (
	MinSessionTimeout = 6 * time.Second
	MaxSessionTimeout = 30 * time.Minute
)

// StaticSessionTimeout is the session timeout of a static member (Conn.InstanceID set) when
// Conn.SessionTimeout is 0: long enough for a process to stop, start on its kept disk and
// rejoin, short enough that a crashed member's partitions are taken over within a minute.
const StaticSessionTimeout = 45 * time.Second

// instanceIDPattern is what Kafka accepts as a group.instance.id (sarama checks the same).
var instanceIDPattern = regexp.MustCompile(`^[0-9a-zA-Z._-]+$`)

// validInstanceID reports why id cannot be a group instance id ("" is none: valid).
func validInstanceID(id string) error {
	switch {
	case id == "":
		return nil
	case id == "." || id == "..":
		return fmt.Errorf("%q is not allowed", id)
	case len(id) > 249:
		return fmt.Errorf("%d characters, at most 249", len(id))
	case !instanceIDPattern.MatchString(id):
		return fmt.Errorf("%q: only letters, digits, '.', '_' and '-' (a pod name fits)", id)
	}
	return nil
}

// Static reports whether the process joins its groups as a static member.
func (c Conn) Static() bool { return c.InstanceID != "" }

// sessionTimeout is the session timeout to use, or 0 for the client's own default.
func (c Conn) sessionTimeout() time.Duration {
	if c.SessionTimeout != 0 {
		return c.SessionTimeout
	}
	if c.Static() {
		return StaticSessionTimeout
	}
	return 0
}

// GroupOpts are the franz-go options of a consumer group member: the static instance id and
// the session timeout. A static member's Close does not leave the group (KIP-345): its
// partitions wait SessionTimeout for it to come back.
func (c Conn) GroupOpts() []kgo.Opt {
	var opts []kgo.Opt
	if c.Static() {
		opts = append(opts, kgo.InstanceID(c.InstanceID))
	}
	if t := c.sessionTimeout(); t > 0 {
		opts = append(opts, kgo.SessionTimeout(t), kgo.HeartbeatInterval(heartbeat(t)))
	}
	return opts
}

// membership sets sarama's group membership: the static instance id and the session timeout.
func (c Conn) membership(sc *sarama.Config) {
	sc.Consumer.Group.InstanceId = c.InstanceID
	if t := c.sessionTimeout(); t > 0 {
		sc.Consumer.Group.Session.Timeout = t
		sc.Consumer.Group.Heartbeat.Interval = heartbeat(t)
	}
}

// heartbeat is a tenth of the session timeout, at most 3 s (both clients' default).
func heartbeat(session time.Duration) time.Duration { return min(session/10, 3*time.Second) }

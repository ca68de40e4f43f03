package pipelines

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/sinks/redis"
)

// LocalStackHint is where the local stack's addresses are: the services' addresses have no
// default, so that a process meant for another cluster never quietly talks to loopback.
const LocalStackHint = "the local stack's addresses: --env-file .stack/env"

// addressField is the Go field path (within Conns) of each system's address.
var addressField = map[string]string{SystemKafka: "Kafka.Brokers", SystemRegistry: "Registry.URL",
	SystemClickHouse: "ClickHouse.Addr", SystemRedis: "Redis.Addr", SystemSensitiveWords: "SensitiveWords.URL"}

// IsSet reports whether the address of system is given.
func (c Conns) IsSet(system string) bool {
	switch system {
	case SystemKafka:
		return len(c.Kafka.Brokers) > 0
	case SystemRegistry:
		return c.Registry.URL != ""
	case SystemClickHouse:
		return c.ClickHouse.Addr != ""
	case SystemRedis:
		// In cluster mode the address is the seeds (addrs); a mode the Conn refuses is left
		// to its Validate.
		if c.Redis.Mode == redis.ModeCluster {
			return len(c.Redis.Addrs) > 0
		}
		return c.Redis.Addr != ""
	case SystemSensitiveWords:
		return c.SensitiveWords.URL != ""
	}
	return false
}

// missing returns a conf.FieldError (matching conf.ErrNotSet) for each of systems whose address
// is not given, at the address's field, saying where to give it.
func (c Conns) missing(systems ...string) error {
	var errs []error
	for _, sys := range systems {
		if c.IsSet(sys) {
			continue
		}
		field := addressField[sys]
		if sys == SystemRedis && c.Redis.Mode == redis.ModeCluster {
			field = "Redis.Addrs"
		}
		k, _ := schema.Key(schema.PathOf(field))
		errs = append(errs, conf.Field(field, fmt.Errorf("%w: give %s or %s in --config (%s)", conf.ErrNotSet, k.Env, k.Path, LocalStackHint)))
	}
	return errors.Join(errs...)
}

// Require checks that the addresses of systems are given, as a command that talks to them
// needs: the error (ErrConfig) names each missing key and its variable.
func (c Conns) Require(systems ...string) error {
	var es conf.Errors
	for _, fe := range conf.Fields(c.missing(systems...)) {
		es = append(es, &conf.Error{Path: schema.PathOf(fe.Field), Msg: fe.Error()})
	}
	if len(es) == 0 {
		return nil
	}
	return es
}

// NeedsOf lists the systems the stages need, each once, in the order of Check.
func NeedsOf(stageNames ...string) []string {
	var out []string
	for _, sys := range []string{SystemKafka, SystemRegistry, SystemClickHouse, SystemRedis, SystemSensitiveWords} {
		for _, s := range stages {
			if slices.Contains(stageNames, s.name) && slices.Contains(s.needs, sys) && !slices.Contains(out, sys) {
				out = append(out, sys)
			}
		}
		for _, n := range stageNames {
			if strings.HasPrefix(n, chschema.StreamStagePrefix) && slices.Contains(streamNeeds, sys) && !slices.Contains(out, sys) {
				out = append(out, sys)
			}
		}
	}
	return out
}

package avro

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"golang.org/x/sync/singleflight"
)

// writerSchemas is a decoder's cache of writer schemas by id: each id is fetched from the
// registry once (concurrent asks for one id share the fetch), parsed, and kept as prepare
// makes it (Decoder resolves it against its reader schema; GenericDecoder keeps it as it
// is). The registry's answer that an id is unknown is remembered for ttl, so poison with an
// unknown id does not cost a registry call per record. Decoder and GenericDecoder each hold
// one. Safe for concurrent use.
type writerSchemas struct {
	reg     Registry
	ttl     time.Duration                                         // 0: an unknown id is asked about again each time
	prepare func(id int, writer avro.Schema) (avro.Schema, error) // nil: the writer as parsed
	// parse turns the registry's schema into the one kept; nil: an AVRO schema, parsed
	// (ProtoDecoder sets its own: a Protobuf message as the Avro record it maps to).
	parse func(ctx context.Context, id int, got sr.Schema) (avro.Schema, error)

	mu      sync.RWMutex
	byID    map[int]avro.Schema
	unknown map[int]unknownID // writer id -> the registry's 40403, until it expires
	fetch   singleflight.Group
}

func newWriterSchemas(reg Registry, ttl time.Duration, prepare func(int, avro.Schema) (avro.Schema, error)) *writerSchemas {
	return &writerSchemas{reg: reg, ttl: ttl, prepare: prepare, byID: map[int]avro.Schema{}, unknown: map[int]unknownID{}}
}

// get returns the schema kept for id, fetching it first if need be. An id the registry does
// not know is ErrUnknownSchemaID; one it could not be asked about is ErrRegistryUnavailable
// (IsRetryable); a schema that is not Avro or does not parse (or that prepare refuses) is
// ErrIncompatibleSchema.
func (c *writerSchemas) get(ctx context.Context, id int) (avro.Schema, error) {
	c.mu.RLock()
	s, ok := c.byID[id]
	u, known := c.unknown[id]
	c.mu.RUnlock()
	if ok {
		return s, nil
	}
	if known && time.Now().Before(u.until) {
		return nil, u.err
	}
	res, err, _ := c.fetch.Do(strconv.Itoa(id), func() (any, error) {
		got, err := c.reg.SchemaByID(ctx, id)
		if err != nil {
			err = classifyRegistryErr(id, err)
			if errors.Is(err, ErrUnknownSchemaID) && c.ttl > 0 {
				c.rememberUnknown(id, err)
			}
			return nil, err
		}
		parse := c.parse
		if parse == nil {
			parse = parseAvroWriter
		}
		w, err := parse(ctx, id, got)
		if err != nil {
			return nil, err
		}
		if c.prepare != nil {
			if w, err = c.prepare(id, w); err != nil {
				return nil, err
			}
		}
		c.mu.Lock()
		c.byID[id] = w
		delete(c.unknown, id)
		c.mu.Unlock()
		return w, nil
	})
	if err != nil {
		return nil, err
	}
	return res.(avro.Schema), nil
}

// parseAvroWriter is an AVRO writer schema, parsed; any other type is ErrIncompatibleSchema.
func parseAvroWriter(_ context.Context, id int, got sr.Schema) (avro.Schema, error) {
	if got.Type != sr.TypeAvro {
		return nil, &DecodeError{Kind: ErrIncompatibleSchema, SchemaID: id, Err: fmt.Errorf("schema type %s, want AVRO", got.Type)}
	}
	w, err := avro.ParseWithCache(got.Schema, "", &avro.SchemaCache{})
	if err != nil {
		return nil, &DecodeError{Kind: ErrIncompatibleSchema, SchemaID: id, Err: fmt.Errorf("parse writer schema: %w", err)}
	}
	return w, nil
}

// maxUnknownIDs bounds the remembered unknown ids, so poison with ever new ids cannot grow
// the decoder without limit: past it, expired answers are dropped, and when none has expired
// the new answer is not remembered.
const maxUnknownIDs = 4096

func (c *writerSchemas) rememberUnknown(id int, err error) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.unknown) >= maxUnknownIDs {
		for k, u := range c.unknown {
			if !now.Before(u.until) {
				delete(c.unknown, k)
			}
		}
		if len(c.unknown) >= maxUnknownIDs {
			return
		}
	}
	c.unknown[id] = unknownID{err: err, until: now.Add(c.ttl)}
}

package avro

import (
	"context"
	"fmt"
	"time"
)

// GokaCodec adapts an Encoder and a Decoder of T to goka's two-method Codec, for topics and
// tables whose values are Confluent-framed Avro (the enriched topic, views over it).
//
// goka stops a processor when an input codec fails, so the ingest group does NOT decode its
// source topics with this codec: it reads raw bytes and calls Decoder.Decode itself, to route
// bad records to the DLQ and to wait out registry outages.
type GokaCodec[T any] struct {
	Enc *Encoder[T] // nil: Encode fails
	Dec *Decoder[T] // nil: Decode fails
	// Timeout bounds the registry requests of one call. Default: 10s.
	Timeout time.Duration
}

func (c *GokaCodec[T]) ctx() (context.Context, context.CancelFunc) {
	t := c.Timeout
	if t == 0 {
		t = 10 * time.Second
	}
	return context.WithTimeout(context.Background(), t)
}

// Encode accepts a T or a *T.
func (c *GokaCodec[T]) Encode(value any) ([]byte, error) {
	if c.Enc == nil {
		return nil, fmt.Errorf("avro: goka codec has no encoder")
	}
	var v T
	switch x := value.(type) {
	case T:
		v = x
	case *T:
		if x == nil {
			return nil, fmt.Errorf("avro: goka codec: nil %T", value)
		}
		v = *x
	default:
		return nil, fmt.Errorf("avro: goka codec: cannot encode %T, want %T", value, v)
	}
	ctx, cancel := c.ctx()
	defer cancel()
	return c.Enc.Encode(ctx, v)
}

// Decode returns a *T.
func (c *GokaCodec[T]) Decode(data []byte) (any, error) {
	if c.Dec == nil {
		return nil, fmt.Errorf("avro: goka codec has no decoder")
	}
	ctx, cancel := c.ctx()
	defer cancel()
	v, _, err := c.Dec.Decode(ctx, data)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

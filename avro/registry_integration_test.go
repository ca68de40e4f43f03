package avro_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	bfavro "github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/testenv"
)

// TestRegisterFetchSchema registers an Avro schema, fetches it back by id, checks that
// registering it again returns the same id, and that an unknown id is a 404 with Confluent's
// error code 40403 (the case the pipeline sends to the DLQ).
func TestRegisterFetchSchema(t *testing.T) {
	testenv.Integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := bfavro.NewRegistryClient(bfavro.RegistryConfig{URL: testenv.Get(testenv.RegistryURL)})
	if err != nil {
		t.Fatal(err)
	}
	if err := bfavro.PingRegistry(ctx, cl); err != nil {
		t.Fatal(err)
	}

	// A field name unique to this run makes the schema new to the registry.
	field := fmt.Sprintf("f%d", time.Now().UnixNano())
	text := `{"type":"record","name":"Smoke","namespace":"dev.backflow.smoke","fields":[` +
		`{"name":"requestId","type":"string"},{"name":"` + field + `","type":"long"}]}`
	subject := "smoke-" + field + "-value"
	id, err := cl.RegisterSchema(ctx, subject, sr.Schema{Schema: text, Type: sr.TypeAvro}, -1, -1)
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	t.Cleanup(func() { _, _ = cl.DeleteSubject(context.Background(), subject, sr.SoftDelete) })
	if id <= 0 {
		t.Fatalf("registered id %d, want > 0", id)
	}
	again, err := cl.RegisterSchema(ctx, subject, sr.Schema{Schema: text, Type: sr.TypeAvro}, -1, -1)
	if err != nil || again != id {
		t.Fatalf("re-register: id %d err %v, want id %d", again, err, id)
	}

	got, err := cl.SchemaByID(ctx, id)
	if err != nil {
		t.Fatalf("schema by id %d: %v", id, err)
	}
	want, err := avro.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	fetched, err := avro.Parse(got.Schema)
	if err != nil {
		t.Fatalf("parse fetched schema %q: %v", got.Schema, err)
	}
	if fetched.Fingerprint() != want.Fingerprint() {
		t.Fatalf("fetched schema %s differs from registered %s", fetched.String(), want.String())
	}

	_, err = cl.SchemaByID(ctx, 1<<30)
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 404 || re.ErrorCode != 40403 {
		t.Fatalf("unknown id: err %v, want 404 with error code 40403", err)
	}
}

package avro_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	bfavro "github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestRegisterFetchSchema registers an Avro schema, fetches it back by id, checks that
// registering it again returns the same id, and that an unknown id is a 404 with Confluent's
// error code 40403 (the case the pipeline sends to the DLQ).
func TestRegisterFetchSchema(t *testing.T) {
	testenv.Integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := bfavro.NewRegistryClient(bfavro.RegistryConn{URL: testenv.Get(testenv.RegistryURL)})
	if err != nil {
		t.Fatal(err)
	}
	if err := bfavro.PingRegistry(ctx, cl); err != nil {
		t.Fatal(err)
	}

	// A field name unique to this run makes the schema new to the registry.
	field := testenv.ID("f")
	text := `{"type":"record","name":"Smoke","namespace":"dev.backflow.smoke","fields":[` +
		`{"name":"requestId","type":"string"},{"name":"` + field + `","type":"long"}]}`
	subject := "smoke-" + field + "-value"
	testenv.Subjects(t, cl, subject)
	id, err := cl.RegisterSchema(ctx, subject, sr.Schema{Schema: text, Type: sr.TypeAvro}, -1, -1)
	if err != nil {
		t.Fatalf("register: %v", err)
	}
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

// TestConcurrentFirstRegistration: eight producers, each with its own client, register the
// same new schema at the same moment. The registry answers most of them with a conflict or an
// error (Apicurio: 409 "already exists", or a 500 from its unique index); every encoder must
// still end up framing with the one id the registry assigned.
func TestConcurrentFirstRegistration(t *testing.T) {
	testenv.Integration(t)
	// Apicurio on H2 makes concurrent first registrations wait on table locks (its log shows
	// "Timeout trying to lock table" and answers 500): that takes tens of seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	field := testenv.ID("f")
	schema := avro.MustParse(`{"type":"record","name":"Race","namespace":"dev.backflow.smoke","fields":[` +
		`{"name":"requestId","type":"string"},{"name":"` + field + `","type":"long"}]}`)
	subject := "race-" + field + "-value"
	admin, err := bfavro.NewRegistryClient(bfavro.RegistryConn{URL: testenv.Get(testenv.RegistryURL)})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Subjects(t, admin, subject)
	const n = 8
	ids := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		// No request is abandoned: with the default 10 s bound a client gives up on a
		// registration still waiting for a table lock, asks again, and the registry may complete
		// the abandoned one after the test has deleted the subject (CI found one left behind).
		// ctx bounds the whole test instead.
		cl, err := bfavro.NewRegistryClient(bfavro.RegistryConn{URL: testenv.Get(testenv.RegistryURL), Timeout: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		enc, err := bfavro.NewEncoder[map[string]any](cl, schema, subject)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// What a stage does: retry what is retryable (a 500 from the registry), fail on the rest.
			for {
				if ids[i], errs[i] = enc.ID(ctx); errs[i] == nil || !bfavro.IsRetryable(errs[i]) || ctx.Err() != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("encoder %d: %v", i, errs[i])
		}
		if ids[i] <= 0 || ids[i] != ids[0] {
			t.Fatalf("ids %v: want one positive id for all", ids)
		}
	}
	got, err := admin.SchemaByID(ctx, ids[0])
	if err != nil || !strings.Contains(got.Schema, field) {
		t.Fatalf("schema %d: %v %q", ids[0], err, got.Schema)
	}
}

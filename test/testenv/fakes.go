package testenv

import (
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/backflowhq/backflow/avro"
)

// FakeRegistry is, for unit tests, franz-go's in-process schema registry (srfake) and
// backflow's client of it (avro.NewRegistryClient); the registry is closed when t ends (close
// it earlier to see an outage).
func FakeRegistry(t testing.TB) (*sr.Client, *srfake.Registry) {
	t.Helper()
	fake := srfake.New()
	t.Cleanup(fake.Close)
	reg, err := avro.NewRegistryClient(avro.RegistryConn{URL: fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return reg, fake
}

package chaos

import "testing"

// The lines as a `backflow run` with a JSON log writes them (goka's through component=goka).
const restartLog = `{"time":"2026-12-06T22:36:08.2Z","level":"INFO","msg":"clickhouse sink: partitions assigned","stage":"sink-clickhouse","group":"sinkch-c1","partitions":"[]"}
{"time":"2026-12-06T22:36:08.4Z","level":"INFO","msg":"clickhouse sink: partitions assigned","stage":"sink-clickhouse","part":"rollups","group":"sinkch-c1-rollups","partitions":"[1]"}
{"time":"2026-12-06T22:36:13.1Z","level":"INFO","msg":"[Processor ingest-c1] setup generation 4, claims=map[string][]int32{\"gw-c1\":[]int32{2}}","component":"goka"}
{"time":"2026-12-06T22:36:13.2Z","level":"INFO","msg":"[Processor ingest-c1 > PartitionProcessor (0) > PartTable] Recovering from 3147 to hwm=3243; (local offset is 3146)","component":"goka"}
{"time":"2026-12-06T22:36:13.3Z","level":"INFO","msg":"[Processor ingest-c1] setup generation 4 ... done","component":"goka"}
{"time":"2026-12-06T22:36:14.1Z","level":"INFO","msg":"[Processor features-c1] setup generation 4, claims=map[string][]int32{}","component":"goka"}
{"time":"2026-12-06T22:36:14.2Z","level":"INFO","msg":"[Processor features-c1 > PartitionProcessor (2) > PartTable] Recovering from 0 to hwm=8072; (local offset is -1)","component":"goka"}
{"time":"2026-12-06T22:36:14.3Z","level":"INFO","msg":"table restored","stage":"sink-features","group":"features-c1","partitions":"2","records":8072,"seconds":0.4}
not a JSON line: [Processor ingest-c1] setup generation 5,
`

func TestSessionsCountsNewSessionsPerGroup(t *testing.T) {
	got := sessions(restartLog)
	want := map[string]int{"sinkch-c1": 1, "sinkch-c1-rollups": 1, "ingest-c1": 1, "features-c1": 1}
	if len(got) != len(want) {
		t.Fatalf("sessions = %v, want %v", got, want)
	}
	for g, n := range want {
		if got[g] != n {
			t.Errorf("sessions[%s] = %d, want %d (all: %v)", g, got[g], n, got)
		}
	}
}

func TestRecoveriesTellWarmFromCold(t *testing.T) {
	rs := recoveries(restartLog)
	if len(rs) != 2 {
		t.Fatalf("%d recoveries, want 2: %+v", len(rs), rs)
	}
	if warm := rs[0]; warm.read() != 96 || warm.cold() {
		t.Errorf("from 3147 to 3243 (local 3146): read %d cold %v, want 96 and warm", warm.read(), warm.cold())
	}
	if cold := rs[1]; cold.read() != 8072 || !cold.cold() {
		t.Errorf("from 0 to 8072 (local -1): read %d cold %v, want 8072 and cold", cold.read(), cold.cold())
	}
	// A store that has a local offset but is far behind is no warm takeover either.
	if behind := (recovery{from: 101, hwm: 1000, local: 100}); !behind.cold() {
		t.Errorf("reading 899 of 1000 records counted as warm")
	}
}

func TestTableRestoredLineCarriesRecords(t *testing.T) {
	var n int64
	for _, l := range logLines(restartLog) {
		if l.Msg == "table restored" && l.Group == "features-c1" {
			n += l.Records
		}
	}
	if n != 8072 {
		t.Errorf("table restored records = %d, want 8072", n)
	}
}

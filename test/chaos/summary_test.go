package chaos

import (
	"path/filepath"
	"testing"
)

// TestSummarizeTakesTheLatestRunOfEachScenario: a re-run replaces the scenario's earlier
// result, the others stay, and the tallies count the verdicts of what is listed.
func TestSummarizeTakesTheLatestRunOfEachScenario(t *testing.T) {
	full := &Report{Started: "A", Brokers: 3, Scale: 1, Results: []Result{
		{ID: 2, Name: "clickhouse-down", Records: 20021, Pass: true, PeakRSSMiB: 104.29, RecoverSec: 7.15},
		{ID: 9, Name: "rebalance", Records: 30000, Lost: 4, Pass: false},
		{ID: 19, Name: "secured", Skipped: "no secured stack"},
	}}
	rerun := &Report{Started: "B", Brokers: 3, Scale: 1, Results: []Result{
		{ID: 9, Name: "rebalance", Records: 30012, DupRaw: 17, Pass: true},
	}}
	s := Summarize(full, rerun)
	if len(s.Runs) != 2 || s.Runs[1].Started != "B" {
		t.Fatalf("runs %+v", s.Runs)
	}
	if len(s.Scenarios) != 3 || s.Scenarios[0].ID != 2 || s.Scenarios[1].ID != 9 || s.Scenarios[2].ID != 19 {
		t.Fatalf("scenarios %+v", s.Scenarios)
	}
	if x := s.Scenarios[1]; x.Run != "B" || x.Records != 30012 || x.Lost != 0 || x.DupRaw != 17 || !x.Pass {
		t.Errorf("scenario 9 is not the re-run's: %+v", x)
	}
	if x := s.Scenarios[0]; x.PeakRSSMiB != 104.3 || x.RecoverSec != 7.2 || x.Run != "A" {
		t.Errorf("scenario 2: %+v", x)
	}
	if s.Passed != 2 || s.Failed != 0 || s.Skipped != 1 {
		t.Errorf("passed %d failed %d skipped %d, want 2 0 1", s.Passed, s.Failed, s.Skipped)
	}
	path := filepath.Join(t.TempDir(), "latest.json")
	if err := s.WriteSummary(path); err != nil {
		t.Fatal(err)
	}
}

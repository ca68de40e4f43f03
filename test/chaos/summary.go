package chaos

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
)

// Summary is the small file the docs quote (test/chaos/latest.json): one line per scenario of
// the latest run that had it, from one or more results files. The raw results (every count,
// note and scratch folder) stay in the ignored .chaos/ folder.
type Summary struct {
	// Runs are the results files it was made from: when each started and on how many brokers.
	Runs      []SummaryRun      `json:"runs"`
	Scenarios []SummaryScenario `json:"scenarios"`
	Passed    int               `json:"passed"`
	Failed    int               `json:"failed"`
	Skipped   int               `json:"skipped"`
}

// SummaryRun is one results file a summary draws on.
type SummaryRun struct {
	Started string  `json:"started"`
	Brokers int     `json:"brokers"`
	Scale   float64 `json:"scale"`
}

// SummaryScenario is one scenario's verdict and the oracle's counts.
type SummaryScenario struct {
	ID         int     `json:"id"`
	Name       string  `json:"name"`
	Run        string  `json:"run"` // the Started of the run it is from
	Records    int     `json:"records"`
	Lost       int     `json:"lost"`
	DupDedup   int     `json:"dup_dedup"`
	DupRaw     int     `json:"dup_raw"`
	Misrouted  int     `json:"misrouted"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	RecoverSec float64 `json:"recover_seconds"`
	Pass       bool    `json:"pass"`
	Skipped    string  `json:"skipped,omitempty"`
}

// Summarize folds reports into a summary; a scenario in a later report replaces the same
// scenario of an earlier one (a re-run), and scenarios are listed by number.
func Summarize(reports ...*Report) *Summary {
	s := &Summary{}
	byID := map[int]SummaryScenario{}
	for _, r := range reports {
		s.Runs = append(s.Runs, SummaryRun{Started: r.Started, Brokers: r.Brokers, Scale: r.Scale})
		for _, x := range r.Results {
			byID[x.ID] = SummaryScenario{ID: x.ID, Name: x.Name, Run: r.Started, Records: x.Records, Lost: x.Lost,
				DupDedup: x.DupDedup, DupRaw: x.DupRaw, Misrouted: x.Misrouted, PeakRSSMiB: math.Round(x.PeakRSSMiB*10) / 10,
				RecoverSec: math.Round(x.RecoverSec*10) / 10, Pass: x.Pass, Skipped: x.Skipped}
		}
	}
	for _, x := range byID {
		s.Scenarios = append(s.Scenarios, x)
		switch {
		case x.Skipped != "":
			s.Skipped++
		case x.Pass:
			s.Passed++
		default:
			s.Failed++
		}
	}
	sort.Slice(s.Scenarios, func(i, j int) bool { return s.Scenarios[i].ID < s.Scenarios[j].ID })
	return s
}

// WriteSummary writes s as indented JSON to path.
func (s *Summary) WriteSummary(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("chaos: summary: %w", err)
	}
	return nil
}

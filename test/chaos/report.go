package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is a suite's results, as written to JSON.
type Report struct {
	Started  string   `json:"started"`
	Finished string   `json:"finished"`
	Host     string   `json:"host"`
	Brokers  int      `json:"brokers"`
	Scale    float64  `json:"scale"`
	Results  []Result `json:"results"`
	Passed   int      `json:"passed"`
	Failed   int      `json:"failed"`
	Skipped  int      `json:"skipped"`
}

// Tally counts the verdicts.
func (r *Report) Tally() {
	r.Passed, r.Failed, r.Skipped = 0, 0, 0
	for _, x := range r.Results {
		switch {
		case x.Skipped != "":
			r.Skipped++
		case x.Pass:
			r.Passed++
		default:
			r.Failed++
		}
	}
	r.Finished = time.Now().UTC().Format(time.RFC3339)
}

// WriteJSON writes the report to path (its folder is created).
func (r *Report) WriteJSON(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteTable prints one line per scenario: the columns of docs/reliability.md's table.
func (r *Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tSCENARIO\tRECORDS\tLOST\tDUP (DEDUP/RAW)\tMISROUTED\tPEAK RSS\tRECOVER\tRESULT")
	for _, x := range r.Results {
		verdict := "pass"
		switch {
		case x.Skipped != "":
			verdict = "SKIPPED: " + x.Skipped
		case !x.Pass:
			verdict = "FAIL"
		}
		if x.Skipped != "" {
			fmt.Fprintf(tw, "%d\t%s\t-\t-\t-\t-\t-\t-\t%s\n", x.ID, x.Name, verdict)
			continue
		}
		recover := "-"
		if x.CaughtUp {
			recover = fmt.Sprintf("%.1f s", x.RecoverSec)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d / %d\t%d\t%.0f MiB\t%s\t%s\n", x.ID, x.Name, x.Records, x.Lost, x.DupDedup, x.DupRaw, x.Misrouted, x.PeakRSSMiB, recover, verdict)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped\n", r.Passed, r.Failed, r.Skipped)
	for _, x := range r.Results {
		for _, f := range x.Failures {
			fmt.Fprintf(w, "  #%d %s: %s\n", x.ID, x.Name, firstLine(f))
		}
		if x.Counts != nil && !x.Pass {
			for _, e := range x.Counts.Examples {
				fmt.Fprintf(w, "  #%d %s: e.g. %s\n", x.ID, x.Name, e)
			}
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// ReadReport reads a report WriteJSON wrote.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	return &r, json.Unmarshal(b, &r)
}

// WriteMarkdown prints the table as docs/reliability.md quotes it, with each scenario's first note.
func (r *Report) WriteMarkdown(w io.Writer) {
	fmt.Fprintln(w, "| # | scenario | records | lost | dup (dedup / raw) | misrouted | peak RSS | recover | result | observed |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, x := range r.Results {
		if x.Skipped != "" {
			fmt.Fprintf(w, "| %d | %s | | | | | | | skipped: %s | |\n", x.ID, x.Name, x.Skipped)
			continue
		}
		verdict := "pass"
		if !x.Pass {
			verdict = "**FAIL**: " + strings.ReplaceAll(firstLine(strings.Join(x.Failures, "; ")), "|", "\\|")
		}
		recover := "-"
		if x.CaughtUp {
			recover = fmt.Sprintf("%.1f s", x.RecoverSec)
		}
		note := ""
		if len(x.Notes) > 0 {
			note = strings.ReplaceAll(x.Notes[len(x.Notes)-1], "|", "\\|")
		}
		fmt.Fprintf(w, "| %d | %s | %d | %d | %d / %d | %d | %.0f MiB | %s | %s | %s |\n",
			x.ID, x.Name, x.Records, x.Lost, x.DupDedup, x.DupRaw, x.Misrouted, x.PeakRSSMiB, recover, verdict, note)
	}
}

package replay

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// timeLayout is how plans and status print record timestamps.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// WritePlan prints the plan as a table, one row per partition, then its totals and warnings.
func WritePlan(w io.Writer, p *Plan) error {
	state := p.State
	if !p.Exists {
		state = "does not exist (created with --create)"
	}
	fmt.Fprintf(w, "group %s (%s, %d live member(s)), spec %s\n", p.Group, state, len(p.Members), p.Spec)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT\tTARGET\tRE-READ\tLAG-AFTER\tCURRENT-TIME\tTARGET-TIME\tNOTE")
	for _, r := range p.Rows {
		cur, reread := "-", "-"
		if r.Current >= 0 {
			cur = strconv.FormatInt(r.Current, 10)
			switch n := r.Reread(); {
			case n < 0:
				reread = fmt.Sprintf("skip %d", -n)
			default:
				reread = strconv.FormatInt(n, 10)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\t%s\t%s\t%s\n", r.Topic, r.Partition, cur, r.Target, reread, r.LagAfter(),
			stamp(r.CurrentTime), stamp(r.TargetTime), r.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d partition(s), %d record(s) to re-read\n", len(p.Rows), p.Reread())
	for _, s := range p.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
	return nil
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(timeLayout)
}

// WriteCSV writes the plan in the CSV kafka-consumer-groups --export writes for one group:
// "topic,partition,offset" lines with the target offsets, no header. Like Kafka's exporter
// (Jackson CSV), it quotes a topic name that holds a character at or below '-'. --from-file
// reads it back, and so does Kafka's tool.
func WriteCSV(w io.Writer, p *Plan) error {
	for _, r := range p.Rows {
		if _, err := fmt.Fprintf(w, "%s,%d,%d\n", csvField(r.Topic), r.Partition, r.Target); err != nil {
			return err
		}
	}
	return nil
}

// csvField quotes s as Jackson's CSV writer does with Kafka's settings: when it holds a
// character at or below '-' (in a topic name, only '-' itself), or a quote.
func csvField(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r <= '-' }) < 0 {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

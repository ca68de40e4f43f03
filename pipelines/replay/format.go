package replay

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf16"
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

// WriteCSV writes the plan byte for byte as kafka-consumer-groups --export prints it for one
// group: "topic,partition,offset" lines with the target offsets, no header, in the order Kafka's
// tool prints them (KafkaOrder), then an empty line. Like Kafka's exporter (Jackson CSV), it
// quotes a topic name that holds a character at or below '-'. --from-file reads it back, and
// so does Kafka's tool.
func WriteCSV(w io.Writer, p *Plan) error {
	for _, r := range KafkaOrder(p.Rows) {
		if _, err := fmt.Fprintf(w, "%s,%d,%d\n", csvField(r.Topic), r.Partition, r.Target); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// KafkaOrder returns rows in the order kafka-consumer-groups lists partitions: the iteration
// order of a java.util.HashMap keyed by TopicPartition, filled one entry at a time. That is
// the order of the buckets, spread(hash) masked by the table size (16, doubled while more than
// three quarters full); rows in one bucket keep their order here (topic, then partition).
func KafkaOrder(rows []Row) []Row {
	size := 16
	for len(rows) > size*3/4 {
		size *= 2
	}
	bucket := func(r Row) uint32 {
		h := uint32(31*(31+r.Partition)) + javaStringHash(r.Topic) // TopicPartition.hashCode
		return (h ^ h>>16) & uint32(size-1)                        // HashMap.hash, then the index
	}
	out := slices.Clone(rows)
	slices.SortStableFunc(out, func(a, b Row) int { return cmp.Compare(bucket(a), bucket(b)) })
	return out
}

// javaStringHash is Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 units,
// with int overflow.
func javaStringHash(s string) uint32 {
	var h uint32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + uint32(u)
	}
	return h
}

// csvField quotes s as Jackson's CSV writer does with Kafka's settings: when it holds a
// character at or below '-' (in a topic name, only '-' itself), or a quote.
func csvField(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r <= '-' }) < 0 {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

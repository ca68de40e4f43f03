package replay

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// timeLayout is how plans and status print record timestamps.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

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

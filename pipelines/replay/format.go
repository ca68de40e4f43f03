package replay

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf16"
)

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

package dlq

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Redrive returns the record that re-drives e (an entry from Decode) to its origin: the raw
// key, value and original headers, to e.Origin.Topic and e.Origin.Partition, with
// backflow.redrive.from, .time (now) and .count (previous + 1, or 1) replacing any earlier
// backflow.redrive.* headers, and without backflow.origin.* or backflow.error.*. The
// timestamp is left zero: the producer stamps the time of the re-drive.
//
// Produce it with kgo.ManualPartitioner so the key lands on the partition it was first
// written to (goka group tables are co-partitioned with their input), through an idempotent
// producer with acks=all. An entry whose value was truncated is ErrTruncated; one without a
// DLQ position or origin is ErrInvalidEntry; an unparsable count is ErrBadHeader.
func Redrive(e Entry, now time.Time) (*kgo.Record, error) {
	o := e.Origin
	switch {
	case e.TruncatedFrom > 0:
		return nil, fmt.Errorf("%w (%d of %d bytes kept): re-produce %s/%d/%d from its origin",
			ErrTruncated, len(o.Value), e.TruncatedFrom, o.Topic, o.Partition, o.Offset)
	case e.DLQTopic == "":
		return nil, fmt.Errorf("%w: no DLQ position (decode the entry from its DLQ record)", ErrInvalidEntry)
	case o.Topic == "" || o.Partition < 0:
		return nil, fmt.Errorf("%w: origin %q partition %d", ErrInvalidEntry, o.Topic, o.Partition)
	}
	count := 0
	headers := make([]kgo.RecordHeader, 0, len(o.Headers)+3)
	for _, h := range o.Headers {
		switch {
		case staleHeader(h.Key):
		case h.Key == HeaderRedriveCount:
			n, err := strconv.Atoi(string(h.Value))
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w %s: %q is not a count", ErrBadHeader, h.Key, h.Value)
			}
			count = n
		case strings.HasPrefix(h.Key, prefixRedrive):
		default:
			headers = append(headers, h)
		}
	}
	str := func(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
	headers = append(headers,
		str(HeaderRedriveFrom, fmt.Sprintf("%s/%d/%d", e.DLQTopic, e.DLQPartition, e.DLQOffset)),
		str(HeaderRedriveTime, now.UTC().Format(TimeLayout)),
		str(HeaderRedriveCount, strconv.Itoa(count+1)),
	)
	return &kgo.Record{Topic: o.Topic, Partition: o.Partition, Key: o.Key, Value: o.Value, Headers: headers}, nil
}

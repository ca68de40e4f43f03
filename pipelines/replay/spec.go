package replay

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/backflowhq/backflow/internal/conf"
)

// Kind is how a spec computes target offsets.
type Kind int

// The specs, as kafka-consumer-groups --reset-offsets names them.
const (
	ToEarliest Kind = iota + 1 // the log start offset
	ToLatest                   // the log end offset
	ToDatetime                 // the first offset whose timestamp is at or after Spec.Time; the end if none
	ByDuration                 // ToDatetime at now - Spec.Duration
	ShiftBy                    // the committed offset + Spec.N (negative: back), clamped
	ToOffset                   // Spec.N, clamped
	FromFile                   // per partition from Spec.File, clamped; the scope only checked
	ToCurrent                  // the committed offset, not clamped; the log end where there is none
)

// Spec says where to move the offsets.
type Spec struct {
	Kind     Kind
	Time     time.Time     // ToDatetime
	Duration time.Duration // ByDuration
	N        int64         // ShiftBy, ToOffset
	// File holds FromFile's offsets; FilePath names the file in the record.
	File     map[TopicPartition]int64
	FilePath string
}

// String is the spec as the command line says it, for plans and records.
func (s Spec) String() string {
	switch s.Kind {
	case ToEarliest:
		return "--to-earliest"
	case ToLatest:
		return "--to-latest"
	case ToDatetime:
		return "--to-datetime " + s.Time.UTC().Format(time.RFC3339Nano)
	case ByDuration:
		return "--by-duration " + FormatDuration(s.Duration)
	case ShiftBy:
		return "--shift-by " + strconv.FormatInt(s.N, 10)
	case ToOffset:
		return "--to-offset " + strconv.FormatInt(s.N, 10)
	case FromFile:
		return "--from-file " + s.FilePath
	case ToCurrent:
		return "--to-current"
	}
	return "(no spec)"
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s:%d", tp.Topic, tp.Partition) }

// TopicScope is one --topic: a topic, with all its partitions (Partitions nil) or some.
type TopicScope struct {
	Topic      string
	Partitions []int32
}

// Scope says which partitions a replay moves. With FromFile it is optional and moves nothing
// itself: as in Kafka's tool, its partitions must exist, and the file's are moved.
type Scope struct {
	// AllTopics: every partition the group has a committed offset on (but its goka loopback).
	AllTopics bool
	Topics    []TopicScope
}

// Given reports whether the scope names any partition (--all-topics or a --topic).
func (s Scope) Given() bool { return s.AllTopics || len(s.Topics) > 0 }

// String writes the scope as its flags: "--all-topics", "--topic t --topic u:0,2", or
// "(none)".
func (s Scope) String() string {
	if s.AllTopics {
		return "--all-topics"
	}
	var parts []string
	for _, t := range s.Topics {
		f := "--topic " + t.Topic
		if len(t.Partitions) > 0 {
			ps := make([]string, len(t.Partitions))
			for i, p := range t.Partitions {
				ps[i] = strconv.Itoa(int(p))
			}
			f += ":" + strings.Join(ps, ",")
		}
		parts = append(parts, f)
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, " ")
}

// ParseTopic parses "topic" or "topic:0,2".
func ParseTopic(s string) (TopicScope, error) {
	name, parts, hasParts := strings.Cut(s, ":")
	if !validTopic(name) {
		return TopicScope{}, badRequest("--topic %q: not a topic name", s)
	}
	ts := TopicScope{Topic: name}
	if !hasParts {
		return ts, nil
	}
	for _, p := range strings.Split(parts, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil || n < 0 {
			return TopicScope{}, badRequest("--topic %q: partition %q is not a number", s, p)
		}
		ts.Partitions = append(ts.Partitions, int32(n))
	}
	return ts, nil
}

var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

func validTopic(s string) bool { return topicName.MatchString(s) && s != "." && s != ".." }

// ParseDuration reads a --by-duration in backflow's one duration form (conf.ParseDuration:
// "6h", "7d", "1d12h", "90m", or ISO-8601's "P1DT6H", "PT30M", "P7D", as Kafka's tool takes).
// It must be positive.
func ParseDuration(s string) (time.Duration, error) {
	d, err := conf.ParseDuration(s)
	if err != nil {
		return 0, badRequest("--by-duration: %v", err)
	}
	if d <= 0 {
		return 0, badRequest("--by-duration %q: must be positive", strings.TrimSpace(s))
	}
	return d, nil
}

// FormatDuration writes d as ISO-8601 (PnDTnHnMnS), the form Kafka's --by-duration takes.
func FormatDuration(d time.Duration) string {
	var b strings.Builder
	b.WriteString("P")
	if days := d / (24 * time.Hour); days > 0 {
		fmt.Fprintf(&b, "%dD", days)
		d -= days * 24 * time.Hour
	}
	if d > 0 {
		b.WriteString("T")
		if h := d / time.Hour; h > 0 {
			fmt.Fprintf(&b, "%dH", h)
			d -= h * time.Hour
		}
		if m := d / time.Minute; m > 0 {
			fmt.Fprintf(&b, "%dM", m)
			d -= m * time.Minute
		}
		if d > 0 {
			b.WriteString(strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "S")
		}
	}
	if b.Len() == 1 {
		return "PT0S"
	}
	return b.String()
}

// datetime is every form of --to-datetime: Kafka's tool's YYYY-MM-DDTHH:mm:SS.sss with an
// optional zone (Z, ±HH:MM, ±HHMM, ±HH), one-digit fields as it allows them, and RFC 3339 (the
// fraction optional).
var datetime = regexp.MustCompile(`^(\d{4})-(\d{1,2})-(\d{1,2})T(\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}(?::?\d{2})?)?$`)

// ParseDatetime reads a --to-datetime in every form Apache Kafka's kafka-consumer-groups
// accepts, and RFC 3339: "2026-11-02T10:00:00.000" (no zone: UTC, as Kafka's tool reads it,
// whatever the machine's zone), "2026-11-02T10:00:00.000Z", "...+02:00", "...+0200", "...+02",
// and "2026-11-02T10:00:00Z" without a fraction. The fraction is a decimal fraction of a second,
// as in RFC 3339; with three digits, Kafka's format, that is Kafka's reading too.
func ParseDatetime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	bad := func(why string) (time.Time, error) {
		return time.Time{}, badRequest("--to-datetime %q: %s; want YYYY-MM-DDTHH:mm:SS.sss, with an optional zone (Z, +02:00, +0200, +02), e.g. 2026-11-02T10:00:00.000Z", s, why)
	}
	m := datetime.FindStringSubmatch(s)
	if m == nil {
		return bad("not a date and time")
	}
	n := make([]int, 7)
	for i := range 6 {
		n[i], _ = strconv.Atoi(m[i+1])
	}
	if m[7] != "" {
		frac, _ := strconv.Atoi((m[7] + "00000000")[:9])
		n[6] = frac
	}
	loc := time.UTC
	if z := m[8]; z != "" && z != "Z" {
		digits := strings.ReplaceAll(z[1:], ":", "")
		hh, _ := strconv.Atoi(digits[:2])
		mm := 0
		if len(digits) == 4 {
			mm, _ = strconv.Atoi(digits[2:])
		}
		if hh > 18 || mm > 59 {
			return bad("zone offset out of range")
		}
		off := hh*3600 + mm*60
		if z[0] == '-' {
			off = -off
		}
		loc = time.FixedZone(z, off)
	}
	t := time.Date(n[0], time.Month(n[1]), n[2], n[3], n[4], n[5], n[6], loc)
	// time.Date normalizes 2026-02-30 into March: a field out of range comes back different.
	if t.Year() != n[0] || int(t.Month()) != n[1] || t.Day() != n[2] || t.Hour() != n[3] || t.Minute() != n[4] || t.Second() != n[5] {
		return bad("a field is out of range")
	}
	return t, nil
}

// unquote removes CSV quotes ("a-b" -> a-b, "" -> ").
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return strings.ReplaceAll(s[1:len(s)-1], `""`, `"`)
	}
	return s
}

// ParsePlanFile reads a plan in the CSV Kafka's tool exports: "topic,partition,offset" lines,
// or "group,topic,partition,offset" lines of which group's are kept; fields may be quoted.
// Blank lines are skipped.
func ParsePlanFile(r io.Reader, group string) (map[TopicPartition]int64, error) {
	out := map[TopicPartition]int64{}
	sc := bufio.NewScanner(r)
	line, withGroup, others := 0, -1, 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		f := strings.Split(text, ",")
		for i := range f {
			f[i] = unquote(strings.TrimSpace(f[i]))
		}
		cols := len(f)
		if cols != 3 && cols != 4 {
			return nil, badRequest("plan file line %d: %d columns, want topic,partition,offset or group,topic,partition,offset", line, cols)
		}
		if withGroup == -1 {
			withGroup = cols - 3
		} else if withGroup != cols-3 {
			return nil, badRequest("plan file line %d: %d columns, earlier lines have %d", line, cols, withGroup+3)
		}
		if cols == 4 {
			if f[0] != group {
				others++
				continue
			}
			f = f[1:]
		}
		if !validTopic(f[0]) {
			return nil, badRequest("plan file line %d: %q is not a topic name", line, f[0])
		}
		p, err := strconv.ParseInt(f[1], 10, 32)
		if err != nil || p < 0 {
			return nil, badRequest("plan file line %d: partition %q is not a number", line, f[1])
		}
		o, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || o < 0 || o == math.MaxInt64 {
			return nil, badRequest("plan file line %d: offset %q is not a number", line, f[2])
		}
		tp := TopicPartition{f[0], int32(p)}
		if _, dup := out[tp]; dup {
			return nil, badRequest("plan file line %d: %s appears twice", line, tp)
		}
		out[tp] = o
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("replay: plan file: %w", err)
	}
	if len(out) == 0 {
		if others > 0 {
			return nil, badRequest("plan file has no line for group %s (%d lines for other groups)", group, others)
		}
		return nil, badRequest("plan file is empty")
	}
	return out, nil
}

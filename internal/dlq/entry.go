package dlq

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Header names of the DLQ contract (see the package doc).
const (
	HeaderOriginTopic     = "backflow.origin.topic"
	HeaderOriginPartition = "backflow.origin.partition"
	HeaderOriginOffset    = "backflow.origin.offset"
	HeaderOriginTimestamp = "backflow.origin.timestamp"
	HeaderErrorStage      = "backflow.error.stage"
	HeaderErrorClass      = "backflow.error.class"
	HeaderErrorMessage    = "backflow.error.message"
	HeaderErrorTime       = "backflow.error.time"
	HeaderErrorTruncated  = "backflow.error.truncated"
	HeaderRedriveFrom     = "backflow.redrive.from"
	HeaderRedriveTime     = "backflow.redrive.time"
	HeaderRedriveCount    = "backflow.redrive.count"

	prefixOrigin  = "backflow.origin."
	prefixError   = "backflow.error."
	prefixRedrive = "backflow.redrive."
)

// ClassUnknown is the class of an error that does not name one.
const ClassUnknown = "unknown"

// MaxMessageLen is the most bytes of backflow.error.message.
const MaxMessageLen = 1024

// TimeLayout is how backflow.error.time and backflow.redrive.time are written: RFC 3339 with
// milliseconds, always UTC ("Z").
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Origin is what the failing stage knows about the bad record. It carries the same fields for
// a franz-go *kgo.Record (see OriginOf) as for a goka/sarama message (topic, partition, offset,
// timestamp, key, value and headers are all on goka.Context and *sarama.ConsumerMessage).
type Origin struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time // zero when unknown; written as -1
	Key       []byte    // raw, may be nil
	Value     []byte    // raw, may be nil
	Headers   []kgo.RecordHeader
}

// OriginOf returns the Origin of a consumed franz-go record. The slices are shared, not copied.
func OriginOf(r *kgo.Record) Origin {
	return Origin{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		Key: r.Key, Value: r.Value, Headers: r.Headers}
}

// Entry is one dead-lettered record: where it came from, and who gave up on it and why.
// NewEntry builds one from an error for WriteBatch; Decode reads one back from the DLQ.
type Entry struct {
	// Origin is the bad record. After Decode its Headers are the original headers minus
	// backflow.origin.* and backflow.error.*, in their original order.
	Origin Origin
	// Stage gave up on the record (backflow.error.stage). Empty: the Writer's Config.Stage.
	Stage string
	// Class is the error's class (backflow.error.class). Empty or not snake_case: "unknown".
	Class string
	// Message is the error's text (backflow.error.message); the Writer cleans and cuts it.
	Message string
	// Time is when the stage gave up (backflow.error.time). Zero: the time of the write.
	Time time.Time
	// TruncatedFrom is the value's original length when the Writer had to cut it to fit
	// (backflow.error.truncated); 0 when the value is complete.
	TruncatedFrom int

	// Where the entry is stored in the DLQ. Set by Decode, needed by Redrive, ignored by
	// WriteBatch.
	DLQTopic     string
	DLQPartition int32
	DLQOffset    int64
}

// NewEntry returns the entry for a record that failed with err, classified by ClassOf and
// timed now. A nil err gives class "unknown" and an empty message.
func NewEntry(o Origin, err error) Entry {
	e := Entry{Origin: o, Class: ClassOf(err), Time: time.Now()}
	if err != nil {
		e.Message = err.Error()
	}
	return e
}

// Classified is an error that names its DLQ class: short snake_case such as "corrupt". The
// avro package's *DecodeError is one. ClassOf finds it anywhere in an error chain.
type Classified interface {
	error
	ErrorClass() string
}

var classRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// ClassOf returns the class of the first Classified error in err's chain (errors.As), or
// "unknown" when there is none or it is not short snake_case (at most 64 of a-z, 0-9, '_').
func ClassOf(err error) string {
	var c Classified
	if errors.As(err, &c) {
		return normalizeClass(c.ErrorClass())
	}
	return ClassUnknown
}

func normalizeClass(c string) string {
	if classRE.MatchString(c) {
		return c
	}
	return ClassUnknown
}

// WithClass returns err marked with class, for errors of our own code that have no type of
// their own: dlq.WithClass("invalid", fmt.Errorf("empty requestId")). It wraps err.
func WithClass(class string, err error) error {
	if err == nil {
		return nil
	}
	return &classedError{class: class, err: err}
}

type classedError struct {
	class string
	err   error
}

func (e *classedError) Error() string      { return e.err.Error() }
func (e *classedError) Unwrap() error      { return e.err }
func (e *classedError) ErrorClass() string { return e.class }

// userinfoRE finds the user:password@ part of URLs in error texts.
var userinfoRE = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)([^/@\s:]*):[^/@\s]*@`)

// cleanMessage makes an error text safe for the message header: valid UTF-8, passwords in URLs
// replaced by "***", and at most MaxMessageLen bytes, cut at a rune boundary and ending in "…".
func cleanMessage(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = userinfoRE.ReplaceAllString(s, "${1}${2}:***@")
	if len(s) <= MaxMessageLen {
		return s
	}
	const ellipsis = "…"
	cut := MaxMessageLen - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// staleHeader reports whether an original header belongs to an earlier DLQ write.
func staleHeader(key string) bool {
	return strings.HasPrefix(key, prefixOrigin) || strings.HasPrefix(key, prefixError)
}

// Decode parses a DLQ record back into an Entry, with the record's DLQ position. A record
// that lacks one of the headers the DLQ contract requires is an ErrMissingHeader naming it;
// one whose value does not parse, or that appears twice, is an ErrBadHeader. Decode does not
// copy the record's slices.
func Decode(r *kgo.Record) (Entry, error) {
	if r == nil {
		return Entry{}, fmt.Errorf("%w: nil record", ErrInvalidEntry)
	}
	ours := map[string]string{}
	var kept []kgo.RecordHeader
	for _, h := range r.Headers {
		if !staleHeader(h.Key) {
			kept = append(kept, h)
			continue
		}
		if _, dup := ours[h.Key]; dup {
			return Entry{}, fmt.Errorf("%w %s: appears twice", ErrBadHeader, h.Key)
		}
		ours[h.Key] = string(h.Value)
	}
	for _, name := range []string{HeaderOriginTopic, HeaderOriginPartition, HeaderOriginOffset,
		HeaderOriginTimestamp, HeaderErrorStage, HeaderErrorClass, HeaderErrorMessage, HeaderErrorTime} {
		if _, ok := ours[name]; !ok {
			return Entry{}, fmt.Errorf("%w %s", ErrMissingHeader, name)
		}
	}
	bad := func(name string, why string) error {
		return fmt.Errorf("%w %s: %q %s", ErrBadHeader, name, ours[name], why)
	}
	e := Entry{
		Origin: Origin{
			Topic:   ours[HeaderOriginTopic],
			Key:     r.Key,
			Value:   r.Value,
			Headers: kept,
		},
		Stage:        ours[HeaderErrorStage],
		Class:        ours[HeaderErrorClass],
		Message:      ours[HeaderErrorMessage],
		DLQTopic:     r.Topic,
		DLQPartition: r.Partition,
		DLQOffset:    r.Offset,
	}
	if e.Origin.Topic == "" {
		return Entry{}, bad(HeaderOriginTopic, "is empty")
	}
	p, err := strconv.ParseInt(ours[HeaderOriginPartition], 10, 32)
	if err != nil || p < 0 {
		return Entry{}, bad(HeaderOriginPartition, "is not a partition number")
	}
	e.Origin.Partition = int32(p)
	if e.Origin.Offset, err = strconv.ParseInt(ours[HeaderOriginOffset], 10, 64); err != nil || e.Origin.Offset < 0 {
		return Entry{}, bad(HeaderOriginOffset, "is not an offset")
	}
	ms, err := strconv.ParseInt(ours[HeaderOriginTimestamp], 10, 64)
	if err != nil || ms < -1 {
		return Entry{}, bad(HeaderOriginTimestamp, "is not milliseconds since the epoch")
	}
	if ms >= 0 {
		e.Origin.Timestamp = time.UnixMilli(ms)
	}
	if e.Time, err = time.Parse(time.RFC3339Nano, ours[HeaderErrorTime]); err != nil {
		return Entry{}, bad(HeaderErrorTime, "is not an RFC 3339 time")
	}
	e.Time = e.Time.UTC()
	if v, ok := ours[HeaderErrorTruncated]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return Entry{}, bad(HeaderErrorTruncated, "is not a length")
		}
		e.TruncatedFrom = n
	}
	return e, nil
}

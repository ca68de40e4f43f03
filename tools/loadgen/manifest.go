package loadgen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// ManifestFormat names the manifest's layout; it is the first line's "manifest" value.
const ManifestFormat = "backflow-loadgen/1"

// Header is the manifest's first line: what run it describes.
type Header struct {
	Manifest       string `json:"manifest"` // ManifestFormat
	RunID          string `json:"runId"`
	Seed           uint64 `json:"seed"`
	InferenceTopic string `json:"inferenceTopic"`
	GatewayTopic   string `json:"gatewayTopic"`
	// Topic is a declared stream's topic, for a stream's run (RunStream); the two above are
	// then empty.
	Topic   string    `json:"topic,omitempty"`
	Started time.Time `json:"started"`
}

// Entry is one record the brokers acknowledged, one JSON object per line after the header.
// Only acknowledged records are listed: the manifest is exactly what is in the topics.
type Entry struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Offset        int64  `json:"offset"`
	RequestID     string `json:"requestId"`
	Phase         string `json:"phase,omitempty"`
	Kind          Kind   `json:"kind"`
	Poison        string `json:"poison,omitempty"` // PoisonKind
	Class         string `json:"class,omitempty"`  // decode error class the pipeline must assign
	SchemaVersion int    `json:"schemaVersion,omitempty"`
	// SchemaID is the registry id a stream's record was written with (RunStream); its
	// RequestID is the record's key (the stream's dedupe key), or its sequence number.
	SchemaID       int  `json:"schemaId,omitempty"`
	Sensitive      bool `json:"sensitive,omitempty"`
	CrossPartition bool `json:"crossPartition,omitempty"`
}

// Valid reports whether the pipeline must accept the record (originals and duplicates).
func (e Entry) Valid() bool { return e.Kind != KindPoison }

// Manifest is a parsed manifest file.
type Manifest struct {
	Header  Header
	Entries []Entry
}

// ReadManifest parses a manifest written by Run.
func ReadManifest(path string) (*Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("loadgen: manifest: %w", err)
	}
	defer f.Close()
	m, err := ParseManifest(f)
	if err != nil {
		return nil, fmt.Errorf("loadgen: manifest %s: %w", path, err)
	}
	return m, nil
}

// ParseManifest reads a manifest from r.
func ParseManifest(r io.Reader) (*Manifest, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	m := &Manifest{}
	for n := 1; sc.Scan(); n++ {
		if n == 1 {
			if err := json.Unmarshal(sc.Bytes(), &m.Header); err != nil || m.Header.Manifest != ManifestFormat {
				return nil, fmt.Errorf("line 1 is not a %s header (%v)", ManifestFormat, err)
			}
			continue
		}
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		m.Entries = append(m.Entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if m.Header.Manifest == "" {
		return nil, fmt.Errorf("empty manifest")
	}
	return m, nil
}

// Location identifies a record in Kafka.
type Location struct {
	Topic     string
	Partition int32
	Offset    int64
}

// ByLocation indexes the entries by where they landed.
func (m *Manifest) ByLocation() map[Location]Entry {
	out := make(map[Location]Entry, len(m.Entries))
	for _, e := range m.Entries {
		out[Location{e.Topic, e.Partition, e.Offset}] = e
	}
	return out
}

// manifestWriter writes entries as they are acknowledged; safe for one goroutine at a time.
type manifestWriter struct {
	w   *bufio.Writer
	enc *json.Encoder
}

func newManifestWriter(w io.Writer, h Header) (*manifestWriter, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	mw := &manifestWriter{w: bw, enc: json.NewEncoder(bw)}
	h.Manifest = ManifestFormat
	if err := mw.enc.Encode(h); err != nil {
		return nil, err
	}
	return mw, nil
}

func (m *manifestWriter) add(e Entry) error { return m.enc.Encode(e) }
func (m *manifestWriter) flush() error      { return m.w.Flush() }

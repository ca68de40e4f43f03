package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/backflowhq/backflow/internal/dlq"
)

// entryPrinter writes entries as aligned text columns or as JSON lines.
type entryPrinter struct {
	json    bool
	eager   bool // write every line at once (tail)
	repeats bool // a REPEATS column: list, folding repeated origin records
	w       io.Writer
	enc     *json.Encoder
	tw      *tabwriter.Writer
	lines   int
}

// flushEvery bounds what the tabwriter buffers; columns realign per block of lines.
const flushEvery = 256

func newEntryPrinter(w io.Writer, asJSON bool) *entryPrinter {
	p := &entryPrinter{json: asJSON, w: w}
	if asJSON {
		p.enc = json.NewEncoder(w)
		p.enc.SetEscapeHTML(false)
	} else {
		p.tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	}
	return p
}

// entryJSON is one line of -o json output.
type entryJSON struct {
	DLQTopic        string `json:"dlq_topic"`
	DLQPartition    int32  `json:"dlq_partition"`
	DLQOffset       int64  `json:"dlq_offset"`
	OriginTopic     string `json:"origin_topic"`
	OriginPartition int32  `json:"origin_partition"`
	OriginOffset    int64  `json:"origin_offset"`
	OriginTimestamp string `json:"origin_timestamp,omitempty"` // RFC 3339 ms; absent when unknown
	Stage           string `json:"stage"`
	Class           string `json:"class"`
	Message         string `json:"message"`
	Time            string `json:"time"`
	Key             []byte `json:"key"` // base64; null for a null key
	ValueBytes      int    `json:"value_bytes"`
	TruncatedFrom   int    `json:"truncated_from,omitempty"`
	Repeats         *int   `json:"repeats,omitempty"` // list without --all: later entries folded into this one
}

// printListed prints an entry of list: with its repeats unless every entry is listed.
func (p *entryPrinter) printListed(l dlq.Listed) error {
	if p.json {
		j := toJSON(l.Entry)
		j.ValueBytes = l.ValueBytes
		if p.repeats {
			j.Repeats = &l.Repeats
		}
		return p.enc.Encode(j)
	}
	return p.printColumns(l.Entry, strconv.Itoa(l.Repeats))
}

func toJSON(e dlq.Entry) entryJSON {
	j := entryJSON{
		DLQTopic: e.DLQTopic, DLQPartition: e.DLQPartition, DLQOffset: e.DLQOffset,
		OriginTopic: e.Origin.Topic, OriginPartition: e.Origin.Partition, OriginOffset: e.Origin.Offset,
		Stage: e.Stage, Class: e.Class, Message: e.Message, Time: e.Time.UTC().Format(dlq.TimeLayout),
		Key: e.Origin.Key, ValueBytes: len(e.Origin.Value), TruncatedFrom: e.TruncatedFrom,
	}
	if !e.Origin.Timestamp.IsZero() {
		j.OriginTimestamp = e.Origin.Timestamp.UTC().Format(dlq.TimeLayout)
	}
	return j
}

func (p *entryPrinter) print(e dlq.Entry) error {
	if p.json {
		return p.enc.Encode(toJSON(e))
	}
	return p.printColumns(e, "")
}

// printColumns prints e as a text line, with repeats in its column when p has one.
func (p *entryPrinter) printColumns(e dlq.Entry, repeats string) error {
	cols := []string{fmt.Sprintf("%d/%d", e.DLQPartition, e.DLQOffset),
		fmt.Sprintf("%s/%d/%d", e.Origin.Topic, e.Origin.Partition, e.Origin.Offset),
		oneLine(e.Class), oneLine(e.Stage), e.Time.UTC().Format(dlq.TimeLayout), oneLine(e.Message)}
	if p.eager {
		// One line at a time: fixed widths instead of alignment over lines not yet seen.
		if p.lines == 0 {
			fmt.Fprintf(p.w, tailFormat, "DLQ", "ORIGIN", "CLASS", "STAGE", "TIME", "MESSAGE")
		}
		p.lines++
		_, err := fmt.Fprintf(p.w, tailFormat, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5])
		return err
	}
	if p.lines%flushEvery == 0 {
		head := "DLQ\tORIGIN\tCLASS\tSTAGE\tTIME\tMESSAGE"
		if p.repeats {
			head = "DLQ\tORIGIN\tCLASS\tSTAGE\tTIME\tREPEATS\tMESSAGE"
		}
		fmt.Fprintln(p.tw, head)
	}
	p.lines++
	if p.repeats {
		cols = slices.Insert(cols, 5, repeats)
	}
	fmt.Fprintln(p.tw, strings.Join(cols, "\t"))
	if p.lines%flushEvery == 0 {
		return p.tw.Flush()
	}
	return nil
}

// tailFormat lays out tail's text lines; a longer value pushes the rest of its line right.
const tailFormat = "%-8s  %-32s  %-16s  %-15s  %-24s  %s\n"

func (p *entryPrinter) flush() error {
	if p.tw != nil {
		return p.tw.Flush()
	}
	return nil
}

// oneLine replaces control characters (newlines, tabs) so an entry stays on one line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

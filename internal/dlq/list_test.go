package dlq

import (
	"fmt"
	"testing"
)

// TestFolderFoldsByOriginAndStage: entries are folded by origin record and stage, as the
// view v_dlq_entries folds them; the first added is kept with the count of the others, without
// its value; entries without an origin are each their own; Keep bounds the entries kept, not
// the counts.
func TestFolderFoldsByOriginAndStage(t *testing.T) {
	entry := func(topic string, part int32, off int64, stage string, dlqPart int32, dlqOff int64) Entry {
		return Entry{Origin: Origin{Topic: topic, Partition: part, Offset: off, Key: []byte(fmt.Sprintf("k-%d-%d", dlqPart, dlqOff)), Value: []byte("0123456789")},
			Stage: stage, Class: "corrupt", DLQTopic: "backflow.dlq", DLQPartition: dlqPart, DLQOffset: dlqOff}
	}
	in := []Entry{
		entry("t", 0, 5, "ingest", 0, 0),          // kept, 2 repeats
		entry("t", 0, 5, "ingest", 0, 3),          // repeat
		entry("t", 0, 5, "sink-clickhouse", 0, 4), // another stage: its own
		entry("t", 1, 5, "ingest", 0, 5),          // another partition
		entry("u", 0, 5, "ingest", 0, 6),          // another topic, 1 repeat
		entry("", 0, 0, "ingest", 0, 7),           // no origin: by DLQ position
		entry("", 0, 0, "ingest", 0, 8),
		entry("t", 0, 5, "ingest", 1, 0), // repeat, on another DLQ partition
		entry("u", 0, 5, "ingest", 2, 9), // repeat
	}
	type row struct {
		dlq     string
		repeats int
	}
	for _, c := range []struct {
		keep   int
		want   []row
		folded int
	}{
		{keep: 0, want: []row{{"0/0", 2}, {"0/4", 0}, {"0/5", 0}, {"0/6", 1}, {"0/7", 0}, {"0/8", 0}}},
		{keep: 2, want: []row{{"0/0", 2}, {"0/4", 0}}},
	} {
		t.Run(fmt.Sprint("keep ", c.keep), func(t *testing.T) {
			f := &Folder{Keep: c.keep}
			var firsts int
			for _, e := range in {
				if f.Add(e) {
					firsts++
				}
			}
			var got []row
			for _, l := range f.Entries() {
				got = append(got, row{fmt.Sprintf("%d/%d", l.DLQPartition, l.DLQOffset), l.Repeats})
				if l.Origin.Value != nil || l.ValueBytes != 10 || string(l.Origin.Key) != fmt.Sprintf("k-%d-%d", l.DLQPartition, l.DLQOffset) {
					t.Errorf("kept %d/%d: value %q, value bytes %d, key %q; want no value, 10 bytes, its key", l.DLQPartition, l.DLQOffset, l.Origin.Value, l.ValueBytes, l.Origin.Key)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) || firsts != 6 || f.Distinct() != 6 || f.Folded() != 3 {
				t.Fatalf("kept %v, %d firsts, %d distinct, %d folded; want %v, 6, 6, 3", got, firsts, f.Distinct(), f.Folded(), c.want)
			}
		})
	}
	// The key kept is a copy: the consumed record's buffer is not held, nor changed under it.
	key := []byte("abc")
	e := entry("t", 0, 1, "ingest", 0, 0)
	e.Origin.Key = key
	f := &Folder{}
	f.Add(e)
	key[0] = 'X'
	if k := string(f.Entries()[0].Origin.Key); k != "abc" {
		t.Fatalf("kept key %q after the record's buffer changed, want abc", k)
	}
}

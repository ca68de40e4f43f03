package main

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/pipelines/replay"
)

// The -o/--output flag of the commands that print what they found (ping, groups, replay's
// plan, replay status, version), as kubectl takes it: a table for people, json or yaml for
// scripts. One row type per kind of row below declares each column once: its json and yaml
// key, and the table's header derived from it (current_offset is CURRENT-OFFSET), so a column
// has one name in every command and every format.

const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
)

// addOutputFlag declares -o/--output on cmd.
func addOutputFlag(cmd *cobra.Command, format *string) {
	cmd.Flags().StringVarP(format, "output", "o", formatTable, "output format: table, json or yaml")
}

// checkOutput refuses a format the commands do not write.
func checkOutput(format string) error {
	switch format {
	case formatTable, formatJSON, formatYAML:
		return nil
	}
	return fmt.Errorf("%w: -o %q: want table, json or yaml", errUsage, format)
}

// writeDoc writes doc as JSON (indented) or YAML; format is not table.
func writeDoc(w io.Writer, format string, doc any) error {
	if format == formatJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return err
	}
	return enc.Close()
}

// writeTable writes rows (a slice of one of the row types) as a table whose headers are the
// fields' keys upper-cased, with - for _, leaving out the columns whose keys omit names. Empty
// strings, negative numbers (none: no commit, no partitions) and zero times print as "-".
func writeTable(w io.Writer, rows any, omit ...string) error {
	v := reflect.ValueOf(rows)
	t := v.Type().Elem()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var cols []int
	var heads []string
	for i := range t.NumField() {
		f := t.Field(i)
		if slices.Contains(omit, columnKey(f)) {
			continue
		}
		cols = append(cols, i)
		heads = append(heads, columnHeader(f))
	}
	fmt.Fprintln(tw, strings.Join(heads, "\t"))
	for r := range v.Len() {
		cells := make([]string, len(cols))
		for c, i := range cols {
			cells[c] = cell(v.Index(r).Field(i))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// columnKey is a field's key in json and yaml.
func columnKey(f reflect.StructField) string {
	key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return key
}

// columnHeader is a field's key as a table header: current_offset is CURRENT-OFFSET.
func columnHeader(f reflect.StructField) string {
	return strings.ToUpper(strings.ReplaceAll(columnKey(f), "_", "-"))
}

func cell(v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "-"
		}
		v = v.Elem()
	}
	if _, named := v.Interface().(fmt.Stringer); !named && v.CanInt() && v.Int() < 0 { // none: no commit, no partitions
		return "-"
	}
	switch x := v.Interface().(type) {
	case string:
		return dash(x)
	case time.Time:
		if x.IsZero() {
			return "-"
		}
		return x.UTC().Format(dlq.TimeLayout) // RFC 3339 with milliseconds, as dlq list prints times
	case []string:
		if len(x) == 0 {
			return "-"
		}
		return strings.Join(x, ",")
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v.Interface())
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// The row types. Offsets are -1 where there is none (a partition without a commit).

// partitionRow is one partition of a group: groups --partitions, replay status (which leaves
// out the group and state columns, said above the table).
type partitionRow struct {
	Group         string `json:"group" yaml:"group"`
	State         string `json:"state" yaml:"state"`
	Topic         string `json:"topic" yaml:"topic"`
	Partition     int32  `json:"partition" yaml:"partition"`
	CurrentOffset int64  `json:"current_offset" yaml:"current_offset"`
	LogEndOffset  int64  `json:"log_end_offset" yaml:"log_end_offset"`
	Lag           int64  `json:"lag" yaml:"lag"`
	ClientID      string `json:"client_id" yaml:"client_id"`
}

// topicRow sums a group's partitions of one topic (groups).
type topicRow struct {
	Group         string `json:"group" yaml:"group"`
	State         string `json:"state" yaml:"state"`
	Members       int    `json:"members" yaml:"members"`
	Topic         string `json:"topic" yaml:"topic"`
	Partitions    int    `json:"partitions" yaml:"partitions"`
	CurrentOffset int64  `json:"current_offset" yaml:"current_offset"` // sum over partitions with a commit
	LogEndOffset  int64  `json:"log_end_offset" yaml:"log_end_offset"`
	Lag           int64  `json:"lag" yaml:"lag"`
}

// memberRow is one live member of a group.
type memberRow struct {
	Group      string `json:"group" yaml:"group"`
	ConsumerID string `json:"consumer_id" yaml:"consumer_id"`
	ClientID   string `json:"client_id" yaml:"client_id"`
	Host       string `json:"host" yaml:"host"`
	InstanceID string `json:"instance_id,omitempty" yaml:"instance_id,omitempty"`
}

// groupDoc is one group as groups -o json|yaml prints it. members is always the list of live
// members (empty when none: their count is its length), at group level only; the table's
// MEMBERS column, a count, is not repeated in topics.
type groupDoc struct {
	Group      string         `json:"group" yaml:"group"`
	State      string         `json:"state" yaml:"state"`
	Members    []memberRow    `json:"members" yaml:"members"`
	Topics     []topicDoc     `json:"topics" yaml:"topics"`
	Partitions []partitionRow `json:"partitions" yaml:"partitions"`
	Lag        int64          `json:"lag" yaml:"lag"`
}

// topicDoc is a topicRow in groupDoc: without the member count, which the group's members list
// gives.
type topicDoc struct {
	Group         string `json:"group" yaml:"group"`
	State         string `json:"state" yaml:"state"`
	Topic         string `json:"topic" yaml:"topic"`
	Partitions    int    `json:"partitions" yaml:"partitions"`
	CurrentOffset int64  `json:"current_offset" yaml:"current_offset"`
	LogEndOffset  int64  `json:"log_end_offset" yaml:"log_end_offset"`
	Lag           int64  `json:"lag" yaml:"lag"`
}

func newGroupDoc(st replay.GroupStatus) groupDoc {
	d := groupDoc{Group: st.Group, State: st.State, Lag: st.Lag(), Members: memberRows(st),
		Topics: []topicDoc{}, Partitions: partitionRows(st)}
	for _, r := range topicRows(st) {
		d.Topics = append(d.Topics, topicDoc{Group: r.Group, State: r.State, Topic: r.Topic, Partitions: r.Partitions,
			CurrentOffset: r.CurrentOffset, LogEndOffset: r.LogEndOffset, Lag: r.Lag})
	}
	return d
}

// topicRows are the group's rows of the groups table, one per topic.
func topicRows(st replay.GroupStatus) []topicRow {
	out := []topicRow{}
	for _, t := range st.Topics() {
		out = append(out, topicRow{Group: st.Group, State: st.State, Members: len(st.Members), Topic: t.Topic,
			Partitions: t.Partitions, CurrentOffset: t.Committed, LogEndOffset: t.End, Lag: t.Lag})
	}
	return out
}

func memberRows(st replay.GroupStatus) []memberRow {
	out := []memberRow{}
	for _, m := range st.Members {
		out = append(out, memberRow{Group: st.Group, ConsumerID: m.ID, ClientID: m.ClientID, Host: m.Host, InstanceID: m.Instance})
	}
	return out
}

func partitionRows(st replay.GroupStatus) []partitionRow {
	out := []partitionRow{}
	for _, p := range st.Partitions {
		out = append(out, partitionRow{Group: st.Group, State: st.State, Topic: p.Topic, Partition: p.Partition,
			CurrentOffset: p.Committed, LogEndOffset: p.End, Lag: p.Lag, ClientID: p.Member})
	}
	return out
}

// planRow is one partition of a replay plan. Kafka's reset-offsets plan calls the target
// NEW-OFFSET too.
type planRow struct {
	Topic         string     `json:"topic" yaml:"topic"`
	Partition     int32      `json:"partition" yaml:"partition"`
	CurrentOffset int64      `json:"current_offset" yaml:"current_offset"`
	NewOffset     int64      `json:"new_offset" yaml:"new_offset"`
	Reread        *rereadNum `json:"re_read" yaml:"re_read"` // none without a committed offset
	LagAfter      int64      `json:"lag_after" yaml:"lag_after"`
	CurrentTime   time.Time  `json:"current_time" yaml:"current_time"` // of the last record consumed
	NewTime       time.Time  `json:"new_time" yaml:"new_time"`         // of the first record to be read
	Note          string     `json:"note" yaml:"note"`
}

// rereadNum is how many records a partition reads again; negative when the move skips them
// forward, which the table says as "skip N".
type rereadNum int64

func (n rereadNum) String() string {
	if n < 0 {
		return fmt.Sprintf("skip %d", -n)
	}
	return fmt.Sprint(int64(n))
}

// planDoc is what replay -o json|yaml prints for a plan.
type planDoc struct {
	Group      string      `json:"group" yaml:"group"`
	State      string      `json:"state" yaml:"state"`
	Exists     bool        `json:"exists" yaml:"exists"`
	Members    []memberRow `json:"members" yaml:"members"`
	Spec       string      `json:"spec" yaml:"spec"`
	Scope      string      `json:"scope" yaml:"scope"` // as flags: --all-topics, --topic T[:P,...], or (none) with --from-file
	Partitions []planRow   `json:"partitions" yaml:"partitions"`
	Reread     int64       `json:"re_read" yaml:"re_read"` // records to read again, over all partitions
	Warnings   []string    `json:"warnings" yaml:"warnings"`
	Stage      []string    `json:"stage_actions" yaml:"stage_actions"` // the stage's own steps, taken only with --execute
}

func planRows(p *replay.Plan) []planRow {
	out := []planRow{}
	for _, r := range p.Rows {
		row := planRow{Topic: r.Topic, Partition: r.Partition, CurrentOffset: r.Current, NewOffset: r.Target, LagAfter: r.LagAfter(),
			CurrentTime: r.CurrentTime, NewTime: r.TargetTime, Note: r.Note}
		if r.Current >= 0 {
			n := rereadNum(r.Reread())
			row.Reread = &n
		}
		out = append(out, row)
	}
	return out
}

func newPlanDoc(p *replay.Prepared) planDoc {
	plan := p.Plan
	d := planDoc{Group: plan.Group, State: plan.State, Exists: plan.Exists, Members: []memberRow{}, Spec: plan.Spec.String(), Scope: plan.Scope.String(),
		Partitions: planRows(plan), Reread: plan.Reread(), Warnings: append(append([]string{}, p.Warnings...), plan.Warnings...), Stage: []string{}}
	for _, m := range plan.Members {
		d.Members = append(d.Members, memberRow{Group: plan.Group, ConsumerID: m.ID, ClientID: m.ClientID, Host: m.Host, InstanceID: m.Instance})
	}
	for _, a := range p.Actions {
		d.Stage = append(d.Stage, a.Describe())
	}
	return d
}

// writePlan prints the plan as a table, one row per partition, then its totals and warnings.
func writePlan(w io.Writer, p *replay.Plan) error {
	state := p.State
	if !p.Exists {
		state = "does not exist (created with --create)"
	}
	fmt.Fprintf(w, "group %s (%s, %d live member(s)), spec %s, scope %s\n", p.Group, state, len(p.Members), p.Spec, p.Scope)
	if err := writeTable(w, planRows(p)); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d partition(s), %d record(s) to re-read\n", len(p.Rows), p.Reread())
	for _, s := range p.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
	return nil
}

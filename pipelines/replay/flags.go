package replay

import (
	"os"

	"github.com/spf13/pflag"
)

// Flags are the command-line flags that make a Request: group, scope, spec and --create. The
// replay command and the tests parse them with the same code.
type Flags struct {
	Group                       string
	Topics                      []string
	AllTopics, Earliest, Latest bool
	Current                     bool
	Datetime, Duration, File    string
	ShiftBy, ToOffset           int64
	Create                      bool
}

// AddFlags registers the flags on fs.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Group, "group", "", "the consumer group (required)")
	fs.StringArrayVar(&f.Topics, "topic", nil, "a topic in scope, or topic:p1,p2 for some partitions; repeatable")
	fs.BoolVar(&f.AllTopics, "all-topics", false, "every partition the group has committed offsets on (but its loopback topic)")
	fs.BoolVar(&f.Earliest, "to-earliest", false, "spec: the log start")
	fs.BoolVar(&f.Latest, "to-latest", false, "spec: the log end")
	fs.StringVar(&f.Datetime, "to-datetime", "", "spec: the first record at or after this time: YYYY-MM-DDTHH:mm:SS.sss (no zone: UTC) with an optional zone, as Kafka's tool takes it, or RFC 3339")
	fs.StringVar(&f.Duration, "by-duration", "", "spec: the first record at or after now minus this (6h, 7d, P1DT6H)")
	fs.Int64Var(&f.ShiftBy, "shift-by", 0, "spec: the committed offset plus this (negative: back)")
	fs.Int64Var(&f.ToOffset, "to-offset", 0, "spec: this offset")
	fs.BoolVar(&f.Current, "to-current", false, "spec: the committed offset, kept as it is; the log end where the group has none")
	fs.StringVar(&f.File, "from-file", "", "spec: the offsets in this CSV file (topic,partition,offset lines); a scope given with it is checked, the file's partitions are moved")
	fs.BoolVar(&f.Create, "create", false, "allow a group that does not exist yet")
}

// SpecFlags are the names of the spec flags, one of which is needed.
var SpecFlags = []string{"to-earliest", "to-latest", "to-current", "to-datetime", "by-duration", "shift-by", "to-offset", "from-file"}

// Request builds the request the flags parsed into fs say (fs tells which were given). It is
// not validated against the stage options; call Request.Validate after adding those.
func (f *Flags) Request(fs *pflag.FlagSet) (Request, error) {
	req := Request{Group: f.Group, Create: f.Create}
	if f.Group == "" {
		return req, badRequest("--group is required")
	}
	var specs []string
	for _, name := range SpecFlags {
		if fs.Changed(name) {
			specs = append(specs, "--"+name)
		}
	}
	if len(specs) != 1 {
		return req, badRequest("give exactly one spec (--to-earliest, --to-latest, --to-current, --to-datetime, --by-duration, --shift-by, --to-offset, --from-file), got %v", specs)
	}
	var err error
	switch specs[0] {
	case "--to-earliest":
		req.Spec.Kind = ToEarliest
	case "--to-latest":
		req.Spec.Kind = ToLatest
	case "--to-current":
		req.Spec.Kind = ToCurrent
	case "--to-datetime":
		req.Spec.Kind = ToDatetime
		req.Spec.Time, err = ParseDatetime(f.Datetime)
	case "--by-duration":
		req.Spec.Kind = ByDuration
		req.Spec.Duration, err = ParseDuration(f.Duration)
	case "--shift-by":
		req.Spec.Kind, req.Spec.N = ShiftBy, f.ShiftBy
	case "--to-offset":
		req.Spec.Kind, req.Spec.N = ToOffset, f.ToOffset
	case "--from-file":
		req.Spec.Kind, req.Spec.FilePath = FromFile, f.File
		var fh *os.File
		if fh, err = os.Open(f.File); err != nil {
			err = badRequest("--from-file: %v", err)
		} else {
			req.Spec.File, err = ParsePlanFile(fh, f.Group)
			fh.Close()
		}
	}
	if err != nil {
		return req, err
	}
	req.Scope.AllTopics = f.AllTopics
	for _, t := range f.Topics {
		ts, err := ParseTopic(t)
		if err != nil {
			return req, err
		}
		req.Scope.Topics = append(req.Scope.Topics, ts)
	}
	return req, nil
}

// ParseArgs parses command-line flags (as the replay command takes them) for group into a
// validated Request.
func ParseArgs(group string, args []string) (Request, error) {
	var f Flags
	fs := pflag.NewFlagSet("replay", pflag.ContinueOnError)
	f.AddFlags(fs)
	if err := fs.Parse(append([]string{"--group", group}, args...)); err != nil {
		return Request{}, badRequest("%v", err)
	}
	req, err := f.Request(fs)
	if err != nil {
		return req, err
	}
	if err := req.Validate(); err != nil {
		return req, err
	}
	return req, nil
}

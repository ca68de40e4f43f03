package conf

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is what every Errors matches (errors.Is): a configuration the caller must fix.
var ErrInvalid = errors.New("conf: invalid configuration")

// ErrSyntax is what the error about a config file that is not YAML matches: nothing else in
// the file was checked.
var ErrSyntax = errors.New("conf: not valid YAML")

// ErrNotSet is what a Validate error matches when a required value, such as a service's
// address, which has no default, was given nowhere.
var ErrNotSet = errors.New("not set")

// FieldError is a Validate error about one field: what a loader needs to report it at the
// field's key path without reading the message.
//
// Field is the Go field path within the struct whose Validate returned the error (Brokers,
// SASL.Mechanism; embedded structs are not named). For a rule between fields it is the field
// whose value brings the rule into force (a SASL mechanism asks for a user), and "" when no
// one field does (a DLQ topic equal to the input topic): such an error is reported at the
// section.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Errorf returns a FieldError about field with the formatted message.
func Errorf(field, format string, a ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, a...)}
}

// Field returns err as a FieldError about field, or nil when err is nil.
func Field(field string, err error) error {
	if err == nil {
		return nil
	}
	return &FieldError{Field: field, Err: err}
}

// Nest puts the errors a nested struct's Validate returned under field, the struct's field in
// the enclosing one, prefixing each message with prefix (e.g. "kafka: "). An error that is no
// FieldError is about the nested struct as a whole. Nil stays nil.
func Nest(field, prefix string, err error) error {
	fes := Fields(err)
	if len(fes) == 0 {
		return nil
	}
	out := make([]error, len(fes))
	for i, fe := range fes {
		e := fe.Err
		if prefix != "" {
			e = prefixed{prefix, e}
		}
		out[i] = &FieldError{Field: join(field, fe.Field), Err: e}
	}
	return errors.Join(out...)
}

type prefixed struct {
	prefix string
	err    error
}

func (p prefixed) Error() string { return p.prefix + p.err.Error() }
func (p prefixed) Unwrap() error { return p.err }

// Fields lists the errors in err, flattening errors.Join, each as a FieldError; one that is no
// FieldError is about the struct as a whole (Field ""). The message is the error's own, with
// whatever wraps the FieldError.
func Fields(err error) []*FieldError {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*FieldError
		for _, e := range j.Unwrap() {
			out = append(out, Fields(e)...)
		}
		return out
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		if fe == err {
			return []*FieldError{fe}
		}
		return []*FieldError{{Field: fe.Field, Err: err}}
	}
	return []*FieldError{{Err: err}}
}

// Error is one problem with one key of a loaded configuration.
type Error struct {
	Path   string // key path, e.g. sink_clickhouse.batch_rows; a section's for a rule between its keys
	Source string // where the bad value came from: "" (the file or the default), a variable or a flag
	Line   int    // its line in the file, when it came from there
	Msg    string
	Err    error // the Validate error Msg says, when there is one (errors.Is on the Error reaches it)
}

func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	where := e.Path
	switch {
	case e.Source != "":
		where += " (" + e.Source + ")"
	case e.Line > 0:
		where += fmt.Sprintf(" (line %d)", e.Line)
	}
	return where + ": " + e.Msg
}

// Errors is every problem found, in key order. It matches ErrInvalid.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Is makes Errors match ErrInvalid.
func (es Errors) Is(target error) bool { return target == ErrInvalid }

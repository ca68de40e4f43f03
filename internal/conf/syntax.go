package conf

import (
	"errors"
	"fmt"
	"strings"

	goccy "github.com/goccy/go-yaml"
	goccyparser "github.com/goccy/go-yaml/parser"
)

// syntaxError is the Error for a file the YAML decoder refused, at the file's path and the line
// of the problem. go.yaml.in/yaml/v3 reports the line where the enclosing construct began (a tab
// on line 3 of a section begun on line 2 is "line 2"), and for a parser error counts it from 0
// (an unclosed '[' on line 6 is "line 5"); github.com/goccy/go-yaml's parser gives the token
// where the problem is, so its line and column are used when it refuses the file too.
func syntaxError(file string, data []byte, yerr error) *Error {
	e := &Error{Path: file, Msg: "not valid YAML: " + strings.TrimPrefix(yerr.Error(), "yaml: "), Err: ErrSyntax}
	_, gerr := goccyparser.ParseBytes(data, 0)
	var ge goccy.Error
	if !errors.As(gerr, &ge) || ge.GetToken() == nil || ge.GetToken().Position == nil {
		return e // goccy reads it: keep yaml/v3's own words and line
	}
	pos := ge.GetToken().Position
	msg := ge.GetMessage()
	if lines := strings.Split(string(data), "\n"); pos.Line >= 1 && pos.Line <= len(lines) {
		if line := lines[pos.Line-1]; strings.Contains(line[:len(line)-len(strings.TrimLeft(line, " \t"))], "\t") {
			msg = "a tab in the indentation: YAML indents with spaces only"
		}
	}
	e.Line = pos.Line
	e.Msg = fmt.Sprintf("not valid YAML: %s (column %d)", msg, pos.Column)
	return e
}

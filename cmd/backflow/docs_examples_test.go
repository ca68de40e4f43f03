package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docExample is a command line (or a console session) of a page in the repository, to be run as
// a reader would paste it.
type docExample struct {
	file string   // the page, from the repository's root
	cmds []string // the command lines, run in order in one shell
	// out is the output the page shows (a console session's lines after its commands); nil
	// when the page shows none.
	out []string
}

// docExamples returns the examples of the pages a reader pastes from: every console session
// in docs/*.md (a fenced block whose commands start with "$ ", followed by what they print),
// every bin/backflow line of README.md's sh blocks, and every bin/backflow dlq line of the
// docs' sh blocks that has no [placeholder].
func docExamples(t *testing.T, root string) []docExample {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	must(t, err)
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	var out []docExample
	for _, page := range pages {
		b, err := os.ReadFile(page)
		must(t, err)
		rel, _ := filepath.Rel(root, page)
		for _, block := range fencedBlocks(string(b)) {
			out = append(out, examplesOf(rel, block)...)
		}
	}
	return out
}

// fence is a fenced block's opening line: its info string, if any, is the block's language.
var fence = regexp.MustCompile("^\\s*```([a-z]*)\\s*$")

type block struct {
	lang  string
	lines []string
}

// fencedBlocks returns the fenced code blocks of a Markdown page, their lines unindented.
func fencedBlocks(page string) []block {
	var out []block
	var cur *block
	indent := ""
	for _, l := range strings.Split(page, "\n") {
		if m := fence.FindStringSubmatch(l); m != nil {
			if cur != nil {
				out = append(out, *cur)
				cur = nil
				continue
			}
			cur = &block{lang: m[1]}
			indent = l[:len(l)-len(strings.TrimLeft(l, " "))]
			continue
		}
		if cur != nil {
			cur.lines = append(cur.lines, strings.TrimPrefix(l, indent))
		}
	}
	return out
}

func examplesOf(page string, b block) []docExample {
	var session *docExample
	var out []docExample
	for _, l := range b.lines {
		if cmd, ok := strings.CutPrefix(l, "$ "); ok {
			if session == nil || len(session.out) > 0 {
				if session != nil {
					out = append(out, *session)
				}
				session = &docExample{file: page}
			}
			session.cmds = append(session.cmds, cmd)
			continue
		}
		if session != nil {
			session.out = append(session.out, l)
		}
	}
	if session != nil {
		for len(session.out) > 0 && strings.TrimSpace(session.out[len(session.out)-1]) == "" {
			session.out = session.out[:len(session.out)-1]
		}
		if session.out == nil {
			session.out = []string{}
		}
		return append(out, *session)
	}
	if b.lang != "sh" {
		return nil
	}
	for _, l := range joinContinuations(strings.Join(b.lines, "\n")) {
		readme := page == "README.md" && strings.HasPrefix(l, "bin/backflow ")
		dlq := strings.HasPrefix(l, "bin/backflow dlq ") && !strings.Contains(l, "[")
		if readme || dlq {
			out = append(out, docExample{file: page, cmds: []string{l}})
		}
	}
	return out
}

// volatile are the parts of a page's output that differ from run to run: a pattern that
// finds such a part in a line the page shows, quoted, and the pattern that matches it in what
// was printed.
var volatile = []struct{ shown, printed string }{ // in this order
	{`  \d+$`, `  \d+`}, // ping: TOOK-MS
	{`schema id \d+`, `schema id \d+`},
	{`cluster [A-Za-z0-9_-]{22},`, `cluster [A-Za-z0-9_-]{22},`}, // ping: the Kafka cluster's id
	{`\d+ subject\\\(s\\\) +`, `\d+ subject\(s\) +`},             // ping: the registry's subjects
}

// abridged is a line of a page's output that stands for the rest of it: what follows is not
// compared.
const abridged = "..."

// matchOutput says how got, what the example printed, differs from want, the lines the page
// shows ("" when it does not).
func matchOutput(want []string, got string) string {
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if i := slices.Index(want, abridged); i >= 0 {
		want = want[:i]
		if len(lines) > i {
			lines = lines[:i]
		}
	}
	if len(lines) != len(want) {
		return fmt.Sprintf("printed %d lines, the page shows %d", len(lines), len(want))
	}
	for i, w := range want {
		p := regexp.QuoteMeta(w)
		for _, v := range volatile {
			p = regexp.MustCompile(v.shown).ReplaceAllLiteralString(p, v.printed)
		}
		if !regexp.MustCompile("^" + p + "$").MatchString(lines[i]) {
			return fmt.Sprintf("line %d: printed\n  %s\nthe page shows\n  %s", i+1, lines[i], w)
		}
	}
	return ""
}

// TestDocExamplesParse: the pages' examples are found: the console sessions with what they
// print, and the command lines of README's sh blocks.
func TestDocExamplesParse(t *testing.T) {
	var sessions, lines int
	for _, e := range docExamples(t, filepath.Join("..", "..")) {
		switch {
		case e.out != nil:
			sessions++
		default:
			lines++
		}
	}
	if sessions < 2 || lines < 4 {
		t.Fatalf("found %d sessions and %d command lines; the parser lost some", sessions, lines)
	}
	if d := matchOutput([]string{"a (schema id 7)", "b"}, "a (schema id 12)\nb\n"); d != "" {
		t.Errorf("a schema id differs: %s", d)
	}
	if d := matchOutput([]string{"4 problem(s)"}, "9 problem(s)\n"); d == "" {
		t.Errorf("a count that differs matched")
	}
	if d := matchOutput([]string{"a", "..."}, "a\nb\nc\n"); d != "" {
		t.Errorf("an abridged output: %s", d)
	}
	ping := "registry         http://127.0.0.1:18081/apis/ccompat/v7  ok     1 subject(s)                                               11"
	if d := matchOutput([]string{ping}, strings.Replace(strings.Replace(ping, "1 subject(s) ", "37 subject(s)", 1), "11", "4", 1)); d != "" {
		t.Errorf("ping's volatile columns: %s", d)
	}
}

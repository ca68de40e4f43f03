// Package chdb runs SQL on a current ClickHouse, chDB in-process, for the tests of what
// backflow's migrations and rows do on a current server (the local stack runs 18.16). New
// installs the pinned chDB once (deploy/clickhouse-current/setup.sh); Run executes statements.
package chdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Engine is a current ClickHouse (chDB, in-process, from PyPI) reached through
// deploy/clickhouse-current/run.py, with its data in a folder of the test's own.
type Engine struct {
	t       *testing.T
	python  string
	script  string
	session string
}

// New sets up the pinned chDB (the first call may take minutes) and an engine whose data lives
// in a folder of the test's own; a failed setup fails the test.
func New(t *testing.T) *Engine {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "deploy", "clickhouse-current", "setup.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("deploy/clickhouse-current/setup.sh failed (%v) after %v: a current ClickHouse is needed for this test\n%s", err, time.Since(start), stderr.String())
	}
	t.Logf("setup.sh took %v", time.Since(start).Round(time.Millisecond))
	return &Engine{t: t, python: string(bytes.TrimSpace(out)),
		script: filepath.Join(root, "deploy", "clickhouse-current", "run.py"), session: t.TempDir()}
}

// Run executes stmts in order and returns the server version and each statement's rows.
func (e *Engine) Run(stmts ...string) (string, [][][]any) {
	e.t.Helper()
	req, _ := json.Marshal(map[string]any{"session": e.session, "statements": stmts})
	cmd := exec.Command(e.python, e.script)
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res struct {
		Version   string    `json:"version"`
		Results   [][][]any `json:"results"`
		Error     string    `json:"error"`
		Statement int       `json:"statement"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber() // keep 64-bit integers exact and printed as ClickHouse printed them
	if jerr := dec.Decode(&res); jerr != nil || err != nil || res.Error != "" {
		stmt := ""
		if res.Error != "" {
			stmt = stmts[res.Statement]
		}
		e.t.Fatalf("run.py: %v %v %s\nstatement: %s\n%s", err, jerr, res.Error, stmt, stderr.String())
	}
	return res.Version, res.Results
}

// moduleRoot is the directory of go.mod, found upwards from the working directory (the test's
// package directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("chdb: no go.mod above the working directory")
		}
		dir = parent
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/internal/secure"
	"github.com/backflowhq/backflow/internal/secure/securetest"
	"github.com/backflowhq/backflow/test/testenv"
)

// lockedBuffer collects the service's log output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

type health struct {
	Status     string `json:"status"`
	Dictionary string `json:"dictionary"`
	Entries    int    `json:"entries"`
}

func getHealth(base string) (health, error) {
	var h health
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return h, errors.New(resp.Status)
	}
	return h, json.NewDecoder(resp.Body).Decode(&h)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func post(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRunServesReloadsOnSIGHUPAndStops runs the binary's run: it serves the dictionary with
// the token from --token-file, reloads on SIGHUP (polling is off, so nothing else can), and
// returns nil after a graceful shutdown that lets an in-flight request finish.
func TestRunServesReloadsOnSIGHUPAndStops(t *testing.T) {
	dir := t.TempDir()
	dict := filepath.Join(dir, "dict.tsv")
	testenv.WriteFile(t, dict, "bluefin\tdemo-fraud\t0.5\n")
	tokenFile := filepath.Join(dir, "token")
	testenv.WriteFile(t, tokenFile, "  tok-123\n")
	addr := freeAddr(t)
	base := "http://" + addr
	logs := &lockedBuffer{}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", addr, "--dictionary", dict, "--token-file", tokenFile,
			"--reload-interval", "0", "--test-faults", "--fault-latency", "300ms"}, logs)
	}()
	var h0 health
	waitFor(t, "healthz", func() bool {
		var err error
		h0, err = getHealth(base)
		return err == nil
	})
	if h0.Entries != 1 || h0.Status != "ok" {
		t.Fatalf("healthz %+v", h0)
	}

	body := `{"items":[{"id":"a","text":"a nightjar and a bluefin"}]}`
	if code, b := post(t, base+"/v1/check", "", body); code != 401 {
		t.Fatalf("without token: %d %s", code, b)
	}
	if code, b := post(t, base+"/v1/check", "tok-123", body); code != 200 || strings.Contains(b, "nightjar") || !strings.Contains(b, `"word":"bluefin"`) {
		t.Fatalf("with token: %d %s", code, b)
	}

	testenv.WriteFile(t, dict, "bluefin\tdemo-fraud\t0.5\nnightjar\tdemo-violence\t0.45\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload on SIGHUP", func() bool {
		h, err := getHealth(base)
		return err == nil && h.Dictionary != h0.Dictionary && h.Entries == 2
	})
	if code, b := post(t, base+"/v1/check", "tok-123", body); code != 200 || !strings.Contains(b, `"word":"nightjar"`) {
		t.Fatalf("after SIGHUP: %d %s", code, b)
	}

	// A request in flight (300 ms of injected latency) when the shutdown starts still gets
	// its answer.
	inflight := make(chan int, 1)
	go func() {
		code, _ := post(t, base+"/v1/check", "tok-123", body)
		inflight <- code
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after the context ended")
	}
	if code := <-inflight; code != 200 {
		t.Errorf("in-flight request during shutdown: %d, want 200", code)
	}
	if _, err := getHealth(base); err == nil {
		t.Error("still serving after run returned")
	}
	out := logs.String()
	for _, want := range []string{"dictionary loaded", "dictionary reloaded", "test faults enabled", "stopped"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tok-123") || strings.Contains(out, "a nightjar and") {
		t.Errorf("token or text in the log:\n%s", out)
	}
}

// TestRunFaultsEndpointOnlyWithFlag: /debug/faults exists only with --test-faults.
func TestRunFaultsEndpointOnlyWithFlag(t *testing.T) {
	dict := filepath.Join(t.TempDir(), "dict.tsv")
	testenv.WriteFile(t, dict, "bluefin\tdemo-fraud\t0.5\n")
	for _, tt := range []struct {
		flags []string
		want  int
	}{
		{nil, 404},
		{[]string{"--test-faults"}, 200},
	} {
		addr := freeAddr(t)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, append([]string{"--addr", addr, "--dictionary", dict}, tt.flags...), io.Discard)
		}()
		waitFor(t, "healthz", func() bool { _, err := getHealth("http://" + addr); return err == nil })
		code, b := post(t, "http://"+addr+"/debug/faults", "", `{"errorRate":0.5}`)
		if code != tt.want {
			t.Errorf("flags %v: POST /debug/faults %d %s, want %d", tt.flags, code, b, tt.want)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestRunRefusesBadStarts(t *testing.T) {
	dir := t.TempDir()
	dict := filepath.Join(dir, "dict.tsv")
	testenv.WriteFile(t, dict, "bluefin\tdemo-fraud\t0.5\n")
	broken := filepath.Join(dir, "broken.tsv")
	testenv.WriteFile(t, broken, "bluefin\tdemo-fraud\n")
	empty := filepath.Join(dir, "empty-token")
	testenv.WriteFile(t, empty, "\n")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no dictionary", nil, "dictionary path"},
		{"missing dictionary", []string{"--dictionary", filepath.Join(dir, "nope.tsv")}, "no such file"},
		{"broken dictionary", []string{"--dictionary", broken}, "line 1"},
		{"fault without --test-faults", []string{"--dictionary", dict, "--fault-error-rate", "0.5"}, "test faults"},
		{"bad fault rate", []string{"--dictionary", dict, "--test-faults", "--fault-429-rate", "2"}, "429 rate"},
		{"missing token file", []string{"--dictionary", dict, "--token-file", filepath.Join(dir, "nope")}, "--token-file"},
		{"empty token file", []string{"--dictionary", dict, "--token-file", empty}, "is empty"},
		{"bad log level", []string{"--dictionary", dict, "--log-level", "loud"}, "--log-level"},
		{"cert without key", []string{"--dictionary", dict, "--tls-cert-file", dict}, "go together"},
		{"cert not pem", []string{"--dictionary", dict, "--tls-cert-file", dict, "--tls-key-file", dict}, "--tls-cert-file"},
		{"review above block", []string{"--dictionary", dict, "--review-threshold", "0.95"}, "review threshold"},
		{"port taken", []string{"--dictionary", dict, "--addr", busy.Addr().String()}, "address already in use"},
		{"unknown flag", []string{"--bogus"}, "usage"},
		{"stray argument", []string{"--dictionary", dict, "extra"}, "usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			err := run(ctx, tt.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("run: %v, want an error mentioning %q", err, tt.wantErr)
			}
		})
	}
	if err := run(t.Context(), []string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
}

// TestRunServesTLS: with a certificate the service answers only over TLS, still wanting its
// token; a plain HTTP request gets no answer from it.
func TestRunServesTLS(t *testing.T) {
	pki := securetest.New(t)
	dir := t.TempDir()
	dict := filepath.Join(dir, "dict.tsv")
	testenv.WriteFile(t, dict, "bluefin\tdemo-fraud\t0.5\n")
	tokenFile := filepath.Join(dir, "token")
	testenv.WriteFile(t, tokenFile, "tok-tls\n")
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", addr, "--dictionary", dict, "--token-file", tokenFile,
			"--tls-cert-file", pki.CertFile, "--tls-key-file", pki.KeyFile}, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	c, err := moderation.New(moderation.Conn{URL: "https://" + addr, TokenFile: tokenFile, TLS: secure.TLS{CAFile: pki.CAFile}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var res []moderation.Result
	for i := 0; ; i++ {
		res, err = c.Check(t.Context(), []moderation.Item{{ID: "a", Text: "B-L-U-E-F-I-N"}})
		if err == nil || i == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond) // still starting
	}
	if err != nil || len(res) != 1 || len(res[0].Hits) != 1 {
		t.Fatalf("check over TLS: %+v %v", res, err)
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered 200")
		}
	}
}

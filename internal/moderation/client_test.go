package moderation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/conf/conftest"
	"github.com/backflowhq/backflow/tools/sensitive-words"
)

var samplePath = filepath.Join("..", "..", "deploy", "sensitive-words", "sample.tsv")

// service runs the real sensitive-word handler in-process on the sample dictionary and counts
// the requests that reach it.
type service struct {
	*sensitivewords.Server
	URL      string
	requests atomic.Int64
}

func startService(t testing.TB, cfg sensitivewords.Config) *service {
	t.Helper()
	cfg.DictionaryPath = samplePath
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := sensitivewords.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &service{Server: srv}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		srv.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

func newClient(t testing.TB, cfg Conn) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestCheckGoodReply(t *testing.T) {
	svc := startService(t, sensitivewords.Config{})
	c := newClient(t, Conn{URL: svc.URL + "/"}) // a trailing slash is fine
	items := []Item{
		{ID: "r1", Text: "is bluefin now"},
		{ID: "r2", Text: "ｚｅｐｈｙｒｉｎｅ and V-E-L-V-E-T H-A-M-M-E-R"},
		{ID: "r3", Text: "这是测 试 词"},
		{ID: "r4", Text: "please summarize the report"},
	}
	got, err := c.Check(t.Context(), items)
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{ID: "r1", RiskScore: 0.5, Verdict: VerdictReview, Categories: []string{"demo-fraud"},
			Hits: []Hit{{Word: "bluefin", Category: "demo-fraud", Weight: 0.5, Start: 3, End: 10}}},
		{ID: "r2", RiskScore: 0.99, Verdict: VerdictBlock, Categories: []string{"demo-spam", "demo-violence"},
			Hits: []Hit{
				{Word: "zephyrine", Category: "demo-spam", Weight: 0.95, Start: 0, End: 9},
				{Word: "velvet hammer", Category: "demo-violence", Weight: 0.8, Start: 14, End: 37},
			}},
		{ID: "r3", RiskScore: 0.5, Verdict: VerdictReview, Categories: []string{"demo-harmless-zh"},
			Hits: []Hit{{Word: "测试词", Category: "demo-harmless-zh", Weight: 0.5, Start: 2, End: 7}}},
		{ID: "r4", RiskScore: 0, Verdict: VerdictAllow, Categories: []string{}, Hits: []Hit{}},
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("results\n got %+v\nwant %+v", got, want)
	}
	// The positions cut the original text.
	if s := string([]rune(items[1].Text)[14:37]); s != "V-E-L-V-E-T H-A-M-M-E-R" {
		t.Errorf("r2 second hit covers %q", s)
	}
}

// TestCheckNoRequestWhenRefusedLocally: batches Check refuses, or does not need to send, never
// reach the service.
func TestCheckNoRequestWhenRefusedLocally(t *testing.T) {
	svc := startService(t, sensitivewords.Config{})
	c := newClient(t, Conn{URL: svc.URL, MaxItems: 2})
	res, err := c.Check(t.Context(), nil)
	if err != nil || res == nil || len(res) != 0 {
		t.Errorf("empty batch: %v, %v; want an empty result", res, err)
	}
	tests := []struct {
		name    string
		items   []Item
		wantErr error
	}{
		{"too many", []Item{{"a", ""}, {"b", ""}, {"c", ""}}, ErrTooManyItems},
		{"empty id", []Item{{"a", ""}, {"", "x"}}, ErrInvalidItem},
		{"duplicate id", []Item{{"a", "x"}, {"a", "y"}}, ErrInvalidItem},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Check(t.Context(), tt.items)
			if !errors.Is(err, tt.wantErr) || IsRetryable(err) {
				t.Errorf("err %v (retryable %v), want %v, not retryable", err, IsRetryable(err), tt.wantErr)
			}
		})
	}
	if n := svc.requests.Load(); n != 0 {
		t.Errorf("%d requests reached the service, want 0", n)
	}
}

func TestCheckMismatch(t *testing.T) {
	items := []Item{{"a", "bluefin"}, {"b", "quasar"}, {"c", "x"}, {"d", "nightjar"}}
	tests := []struct {
		name   string
		faults sensitivewords.Faults
		want   MismatchError
	}{
		{"wrong count", sensitivewords.Faults{WrongCountRate: 1}, MismatchError{Sent: 4, Received: 3, Missing: []string{"d"}}},
		{"wrong order", sensitivewords.Faults{WrongOrderRate: 1}, MismatchError{Sent: 4, Received: 4, Misplaced: []string{"a", "b", "c", "d"}}},
		{"both", sensitivewords.Faults{WrongCountRate: 1, WrongOrderRate: 1}, MismatchError{Sent: 4, Received: 3, Missing: []string{"d"}, Misplaced: []string{"a", "c"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := startService(t, sensitivewords.Config{TestFaults: true, Faults: tt.faults})
			c := newClient(t, Conn{URL: svc.URL})
			res, err := c.Check(t.Context(), items)
			if res != nil {
				t.Errorf("results %+v returned with a mismatch", res)
			}
			if !errors.Is(err, ErrMismatch) || !IsRetryable(err) {
				t.Fatalf("err %v, want a retryable ErrMismatch", err)
			}
			me, ok := errors.AsType[*MismatchError](err)
			if !ok {
				t.Fatalf("err %T is not a *MismatchError", err)
			}
			if fmt.Sprintf("%+v", *me) != fmt.Sprintf("%+v", tt.want) {
				t.Errorf("mismatch %+v, want %+v", *me, tt.want)
			}
			if want := slices.Concat(tt.want.Missing, tt.want.Misplaced); !slices.Equal(me.Affected(), want) {
				t.Errorf("Affected %v, want %v", me.Affected(), want)
			}
			for _, id := range me.Affected() {
				if !strings.Contains(err.Error(), fmt.Sprintf("%q", id)) {
					t.Errorf("error %q does not name %q", err, id)
				}
			}
		})
	}
}

// TestMatchIDs covers replies the fault injection cannot produce.
func TestMatchIDs(t *testing.T) {
	sent := []Item{{"a", ""}, {"b", ""}, {"c", ""}}
	reply := func(ids ...string) []wireResult {
		out := make([]wireResult, len(ids))
		for i, id := range ids {
			out[i].ID = id
		}
		return out
	}
	tests := []struct {
		name string
		got  []wireResult
		want *MismatchError
	}{
		{"exact", reply("a", "b", "c"), nil},
		{"empty reply", reply(), &MismatchError{Sent: 3, Received: 0, Missing: []string{"a", "b", "c"}}},
		{"stranger in place of b", reply("a", "x", "c"), &MismatchError{Sent: 3, Received: 3, Missing: []string{"b"}, Unexpected: []string{"x"}}},
		{"duplicate a", reply("a", "a", "c"), &MismatchError{Sent: 3, Received: 3, Missing: []string{"b"}, Unexpected: []string{"a"}}},
		{"extra at the end", reply("a", "b", "c", "d"), &MismatchError{Sent: 3, Received: 4, Unexpected: []string{"d"}}},
		{"swap", reply("b", "a", "c"), &MismatchError{Sent: 3, Received: 3, Misplaced: []string{"a", "b"}}},
		{"shifted by a missing one", reply("b", "c"), &MismatchError{Sent: 3, Received: 2, Missing: []string{"a"}, Misplaced: []string{"b", "c"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := matchIDs(sent, tt.got)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("err %v, want none", err)
				}
				return
			}
			me, ok := errors.AsType[*MismatchError](err)
			if !ok || fmt.Sprintf("%+v", *me) != fmt.Sprintf("%+v", *tt.want) {
				t.Fatalf("err %v, want %+v", err, *tt.want)
			}
		})
	}
	many := make([]Item, 30)
	for i := range many {
		many[i].ID = fmt.Sprintf("id%02d", i)
	}
	err := matchIDs(many, nil)
	if !strings.Contains(err.Error(), "and 20 more") {
		t.Errorf("a long list is not shortened: %v", err)
	}
}

func TestCheckStatusErrors(t *testing.T) {
	items := []Item{{"a", "bluefin"}, {"b", "quasar"}, {"c", "x"}}
	tests := []struct {
		name        string
		svcCfg      sensitivewords.Config
		cliCfg      Conn
		items       []Item
		wantStatus  []int
		wantCode    string
		wantErr     error
		wantRetry   bool
		retryAfter  time.Duration
		wantRequest bool
	}{
		{"5xx", sensitivewords.Config{TestFaults: true, Faults: sensitivewords.Faults{ErrorRate: 1}}, Conn{}, items,
			[]int{500, 503}, "injected_fault", ErrUnavailable, true, 0, true},
		{"429", sensitivewords.Config{TestFaults: true, Faults: sensitivewords.Faults{Rate429: 1}}, Conn{}, items,
			[]int{429}, "rate_limited", ErrUnavailable, true, time.Second, true},
		{"401 without token", sensitivewords.Config{Token: "tok-R1ght"}, Conn{}, items,
			[]int{401}, "unauthorized", ErrUnauthorized, true, 0, true},
		{"401 wrong token", sensitivewords.Config{Token: "tok-R1ght"}, Conn{Token: "tok-Wr0ng"}, items,
			[]int{401}, "unauthorized", ErrUnauthorized, true, 0, true},
		{"413 too many items", sensitivewords.Config{MaxItems: 2}, Conn{MaxItems: 5}, items,
			[]int{413}, "too_many_items", ErrRejected, false, 0, true},
		{"413 body too large", sensitivewords.Config{MaxBodyBytes: 1024}, Conn{}, []Item{{"a", strings.Repeat("x", 2000)}},
			[]int{413}, "body_too_large", ErrRejected, false, 0, true},
		{"400 id too long", sensitivewords.Config{}, Conn{}, []Item{{strings.Repeat("i", 300), "x"}},
			[]int{400}, "bad_request", ErrRejected, false, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := startService(t, tt.svcCfg)
			tt.cliCfg.URL = svc.URL
			c := newClient(t, tt.cliCfg)
			res, err := c.Check(t.Context(), tt.items)
			if res != nil {
				t.Errorf("results %+v with an error", res)
			}
			se, ok := errors.AsType[*StatusError](err)
			if !ok {
				t.Fatalf("err %v (%T), want a *StatusError", err, err)
			}
			if !slices.Contains(tt.wantStatus, se.StatusCode) || se.Code != tt.wantCode || se.Message == "" {
				t.Errorf("status %d code %q message %q, want one of %v and %q", se.StatusCode, se.Code, se.Message, tt.wantStatus, tt.wantCode)
			}
			if !errors.Is(err, tt.wantErr) || IsRetryable(err) != tt.wantRetry {
				t.Errorf("err %v: Is(%v) %v, retryable %v; want true, %v", err, tt.wantErr, errors.Is(err, tt.wantErr), IsRetryable(err), tt.wantRetry)
			}
			if se.RetryAfter != tt.retryAfter {
				t.Errorf("RetryAfter %v, want %v", se.RetryAfter, tt.retryAfter)
			}
			if strings.Contains(err.Error(), "tok-") {
				t.Errorf("a token leaked into the error: %v", err)
			}
		})
	}
	t.Run("right token", func(t *testing.T) {
		svc := startService(t, sensitivewords.Config{Token: "tok-R1ght"})
		c := newClient(t, Conn{URL: svc.URL, Token: "tok-R1ght"})
		if res, err := c.Check(t.Context(), items); err != nil || len(res) != 3 {
			t.Fatalf("%v, %v", res, err)
		}
	})
}

func TestCheckTimeout(t *testing.T) {
	svc := startService(t, sensitivewords.Config{TestFaults: true, Faults: sensitivewords.Faults{Latency: 2 * time.Second}})
	c := newClient(t, Conn{URL: svc.URL, Timeout: 150 * time.Millisecond})
	start := time.Now()
	_, err := c.Check(t.Context(), []Item{{"a", "bluefin"}})
	took := time.Since(start)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !IsRetryable(err) {
		t.Fatalf("err %v, want a retryable ErrUnavailable wrapping the deadline", err)
	}
	if took > time.Second {
		t.Errorf("took %v with a 150ms timeout", took)
	}
	// Once the latency is gone, the same client works.
	if err := svc.SetFaults(sensitivewords.Faults{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Check(t.Context(), []Item{{"a", "bluefin"}}); err != nil {
		t.Fatalf("after the latency: %v", err)
	}
}

func TestCheckCallerCancels(t *testing.T) {
	svc := startService(t, sensitivewords.Config{TestFaults: true, Faults: sensitivewords.Faults{Latency: 2 * time.Second}})
	c := newClient(t, Conn{URL: svc.URL})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Check(ctx, []Item{{"a", "bluefin"}})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnavailable) || !IsRetryable(err) {
		t.Fatalf("err %v, want the caller's context error, retryable, not ErrUnavailable", err)
	}
}

func TestCheckServiceDown(t *testing.T) {
	hs := httptest.NewServer(http.NotFoundHandler())
	url := hs.URL
	hs.Close() // nothing listens there now
	c := newClient(t, Conn{URL: url, Timeout: time.Second})
	_, err := c.Check(t.Context(), []Item{{"a", "x"}})
	if !errors.Is(err, ErrUnavailable) || !IsRetryable(err) {
		t.Fatalf("err %v, want a retryable ErrUnavailable", err)
	}
}

// TestCheckWrongPeer: what a wrong URL or a broken proxy answers. Each handler is a stand-in
// for something that is not the service.
func TestCheckWrongPeer(t *testing.T) {
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		wantErr   error
		wantRetry bool
	}{
		{"404 of another server", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, ErrUnavailable, true},
		{"502 HTML from a proxy", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(502)
			io.WriteString(w, "<html>bad gateway</html>")
		}, ErrUnavailable, true},
		{"200 that is not JSON", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html>") }, ErrBadReply, true},
		{"200 without items", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"dictionary":"x"}`) }, ErrBadReply, true},
		{"unknown verdict", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"items":[{"id":"a","riskScore":0.1,"verdict":"MAYBE","categories":[],"hits":[]}]}`)
		}, ErrBadReply, true},
		{"score above 1", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"items":[{"id":"a","riskScore":1.5,"verdict":"BLOCK","categories":[],"hits":[]}]}`)
		}, ErrBadReply, true},
		{"bad hit span", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"items":[{"id":"a","riskScore":0.5,"verdict":"REVIEW","categories":["c"],"hits":[{"word":"w","category":"c","weight":0.5,"start":4,"end":2}]}]}`)
		}, ErrBadReply, true},
		{"redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) }, ErrBadReply, true},
		{"405", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(405) }, ErrRejected, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(tt.handler)
			defer hs.Close()
			c := newClient(t, Conn{URL: hs.URL})
			_, err := c.Check(t.Context(), []Item{{"a", "x"}})
			if !errors.Is(err, tt.wantErr) || IsRetryable(err) != tt.wantRetry {
				t.Fatalf("err %v (retryable %v), want %v (retryable %v)", err, IsRetryable(err), tt.wantErr, tt.wantRetry)
			}
		})
	}
	// Unknown fields in a good reply are accepted (the service may grow).
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"items":[{"id":"a","riskScore":0,"verdict":"ALLOW","categories":[],"hits":[],"lang":"en"}],"dictionary":"x","took":1}`)
	}))
	defer hs.Close()
	if res, err := newClient(t, Conn{URL: hs.URL}).Check(t.Context(), []Item{{"a", "x"}}); err != nil || res[0].Verdict != VerdictAllow {
		t.Fatalf("%+v, %v", res, err)
	}
}

func TestIsRetryable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"unavailable", fmt.Errorf("x: %w", ErrUnavailable), true},
		{"500", &StatusError{StatusCode: 500}, true},
		{"503", &StatusError{StatusCode: 503}, true},
		{"429", &StatusError{StatusCode: 429}, true},
		{"408", &StatusError{StatusCode: 408}, true},
		{"404", &StatusError{StatusCode: 404}, true},
		{"401", &StatusError{StatusCode: 401}, true},
		{"403", &StatusError{StatusCode: 403}, true},
		{"mismatch", &MismatchError{Sent: 2, Received: 1, Missing: []string{"b"}}, true},
		{"bad reply", fmt.Errorf("%w: junk", ErrBadReply), true},
		{"canceled", context.Canceled, true},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{"400", &StatusError{StatusCode: 400}, false},
		{"413", &StatusError{StatusCode: 413, Code: "too_many_items"}, false},
		{"415", &StatusError{StatusCode: 415}, false},
		{"422", &StatusError{StatusCode: 422}, false},
		{"too many items", fmt.Errorf("%w: 200", ErrTooManyItems), false},
		{"invalid item", ErrInvalidItem, false},
		{"foreign error", errors.New("something else"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsRetryable(tt.err); got != tt.want {
				t.Errorf("IsRetryable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestConnValidate(t *testing.T) {
	cases := []conftest.Case[Conn]{
		{Name: "ok", Config: Conn{URL: "http://127.0.0.1:18090"}},
		{Name: "ok https with path", Config: Conn{URL: "https://mod.example/sensitive/"}},
		{Name: "no url", Config: Conn{}, WantErr: "moderation: url: not set", Field: "URL"},
		{Name: "no scheme", Config: Conn{URL: "127.0.0.1:18090"}, WantErr: "moderation: url", Field: "URL"},
		{Name: "ftp", Config: Conn{URL: "ftp://host"}, WantErr: "http:// or https://", Field: "URL"},
		{Name: "no host", Config: Conn{URL: "http://"}, WantErr: "no host", Field: "URL"},
		{Name: "credentials in url", Config: Conn{URL: "http://user:pw@host"}, WantErr: "carries credentials", Field: "URL"},
		{Name: "query", Config: Conn{URL: "http://host/?a=1"}, WantErr: "no query", Field: "URL"},
		{Name: "negative timeout", Config: Conn{URL: "http://h", Timeout: -time.Second}, WantErr: "moderation: timeout", Field: "Timeout"},
		{Name: "negative max items", Config: Conn{URL: "http://h", MaxItems: -1}, WantErr: "moderation: max items", Field: "MaxItems"},
	}
	conftest.Validate(t, cases, "pw")
	for _, c := range cases {
		if _, err := New(c.Config); (err != nil) != (c.WantErr != "") {
			t.Errorf("%s: New: %v, want an error %v", c.Name, err, c.WantErr != "")
		}
	}
	c := Conn{URL: "http://h"}.withDefaults()
	if c.Timeout != 5*time.Second || c.MaxItems != 100 {
		t.Errorf("defaults %+v, want 5s and 100", c)
	}
}

package moderation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/backflowhq/backflow/internal/secure"
)

// Verdicts a Result carries.
const (
	VerdictAllow  = "ALLOW"
	VerdictReview = "REVIEW"
	VerdictBlock  = "BLOCK"
)

// Item is one text to check. ID identifies it in the reply and must be unique in a batch
// (the pipeline uses the record's request id); the service accepts ids of at most 256 bytes.
type Item struct {
	ID   string
	Text string
}

// Result is the service's answer for one Item.
type Result struct {
	ID string
	// RiskScore in [0,1]: 1 − ∏(1 − weight) over the distinct dictionary entries found.
	RiskScore float32
	// Verdict is VerdictAllow, VerdictReview or VerdictBlock.
	Verdict string
	// Categories are the distinct categories found, sorted; empty when none.
	Categories []string
	// Hits are the occurrences found (the service lists at most its --max-hits-per-item).
	Hits []Hit
}

// Hit is one occurrence of a dictionary entry in a text.
type Hit struct {
	Word     string // the dictionary's spelling
	Category string
	Weight   float32
	// Start and End are rune offsets into the text as sent: [Start, End).
	Start, End int32
}

// Client calls the sensitive-word service. It is safe for concurrent use.
type Client struct {
	cfg      Conn
	endpoint string
	http     *http.Client
}

// New validates cfg and returns a Client. It does not contact the service.
func New(cfg Conn) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	tok, err := secure.ReadSecret("moderation: token", cfg.Token, cfg.TokenFile)
	if err != nil {
		return nil, err
	}
	cfg.Token = tok
	tc, err := cfg.TLS.Config()
	if err != nil {
		return nil, fmt.Errorf("moderation: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32 // one ingest instance calls from many partitions at once
	if tc != nil {
		tr.TLSClientConfig = tc
	}
	return &Client{
		cfg:      cfg,
		endpoint: strings.TrimRight(cfg.URL, "/") + "/v1/check",
		http: &http.Client{
			Transport: tr,
			// A redirect would turn the POST into a GET; the contract has none.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// MaxItems is the most items one Check may send (Conn.MaxItems).
func (c *Client) MaxItems() int { return c.cfg.MaxItems }

// Close releases idle connections. The Client must not be used afterwards.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// maxReplyBytes bounds a reply: 1000 items with 256 hits each fit.
const maxReplyBytes = 64 << 20

// maxErrorBytes bounds the error body read from a non-200 reply.
const maxErrorBytes = 16 << 10

// Wire types: the JSON of tools/sensitive-words's API (see its package doc).
type (
	wireRequest struct {
		Items []wireItem `json:"items"`
	}
	wireItem struct {
		ID   string `json:"id"`
		Text string `json:"text"`
	}
	wireReply struct {
		Items      []wireResult `json:"items"`
		Dictionary string       `json:"dictionary"`
	}
	wireResult struct {
		ID         string    `json:"id"`
		RiskScore  float64   `json:"riskScore"`
		Verdict    string    `json:"verdict"`
		Categories []string  `json:"categories"`
		Hits       []wireHit `json:"hits"`
	}
	wireHit struct {
		Word     string  `json:"word"`
		Category string  `json:"category"`
		Weight   float64 `json:"weight"`
		Start    int64   `json:"start"`
		End      int64   `json:"end"`
	}
	wireError struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
)

// Check sends items in one request and returns their results in the same order. An empty
// batch returns an empty slice without a request. The reply is validated strictly: the same
// number of items with the same ids in the same order, else a *MismatchError and no results.
// Errors wrap the sentinels of errors.go; see IsRetryable.
func (c *Client) Check(ctx context.Context, items []Item) ([]Result, error) {
	if len(items) == 0 {
		return []Result{}, nil
	}
	if len(items) > c.cfg.MaxItems {
		return nil, fmt.Errorf("%w: %d items, at most %d (Config.MaxItems)", ErrTooManyItems, len(items), c.cfg.MaxItems)
	}
	req := wireRequest{Items: make([]wireItem, len(items))}
	seen := make(map[string]int, len(items))
	for i, it := range items {
		if it.ID == "" {
			return nil, fmt.Errorf("%w: items[%d]: empty id", ErrInvalidItem, i)
		}
		if j, dup := seen[it.ID]; dup {
			return nil, fmt.Errorf("%w: items[%d]: id %q repeats items[%d]", ErrInvalidItem, i, it.ID, j)
		}
		seen[it.ID] = i
		req.Items[i] = wireItem(it)
	}
	// goccy/go-json: encoding/json's behaviour, at 0.62 of its CPU to encode a request and 0.27
	// to decode a reply (BenchmarkWireCodec).
	body, err := gojson.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding the request: %w", ErrInvalidItem, err) // strings always encode
	}

	reply, err := c.post(ctx, body)
	if err != nil {
		return nil, err
	}
	if err := matchIDs(items, reply.Items); err != nil {
		return nil, err
	}
	out := make([]Result, len(reply.Items))
	for i, r := range reply.Items {
		res, err := convert(r)
		if err != nil {
			return nil, fmt.Errorf("%w: item %q: %w", ErrBadReply, r.ID, err)
		}
		out[i] = res
	}
	return out, nil
}

// post sends the request and decodes a 200 reply.
func (c *Client) post(ctx context.Context, body []byte) (*wireReply, error) {
	callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(callCtx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("User-Agent", "backflow-moderation")
	if c.cfg.Token != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	start := time.Now()
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, c.transportErr(ctx, err, start)
	}
	defer resp.Body.Close()

	if resp.StatusCode != http.StatusOK {
		return nil, statusErr(resp)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes+1))
	if err != nil {
		return nil, c.transportErr(ctx, err, start)
	}
	if len(data) > maxReplyBytes {
		return nil, fmt.Errorf("%w: reply larger than %d bytes", ErrBadReply, maxReplyBytes)
	}
	var reply wireReply
	if err := gojson.Unmarshal(data, &reply); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadReply, err)
	}
	if reply.Items == nil {
		return nil, fmt.Errorf("%w: no \"items\" array", ErrBadReply)
	}
	return &reply, nil
}

// transportErr classifies a failure to send or to read the reply. The caller's own context
// ending is returned as such; our timeout and network errors are ErrUnavailable.
func (c *Client) transportErr(ctx context.Context, err error, start time.Time) error {
	if ctx.Err() != nil {
		return fmt.Errorf("moderation: check abandoned: %w", context.Cause(ctx))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: no answer within %v (Config.Timeout): %w", ErrUnavailable, c.cfg.Timeout, err)
	}
	return fmt.Errorf("%w: after %v: %w", ErrUnavailable, time.Since(start).Round(time.Millisecond), err)
}

func statusErr(resp *http.Response) error {
	e := &StatusError{StatusCode: resp.StatusCode}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if secs, err := strconv.Atoi(s); err == nil && secs >= 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	var we wireError
	if json.Unmarshal(data, &we) == nil && (we.Code != "" || we.Error != "") {
		e.Code, e.Message = we.Code, we.Error
	} else {
		e.Message = strings.TrimSpace(string(bytes.ToValidUTF8(data[:min(len(data), 200)], nil)))
	}
	return e
}

// matchIDs checks that got answers want item for item.
func matchIDs(want []Item, got []wireResult) error {
	ok := len(want) == len(got)
	for i := 0; ok && i < len(want); i++ {
		ok = want[i].ID == got[i].ID
	}
	if ok {
		return nil
	}
	sent := make(map[string]int, len(want)) // id → position
	for i, it := range want {
		sent[it.ID] = i
	}
	e := &MismatchError{Sent: len(want), Received: len(got)}
	answered := make(map[string]bool, len(got))
	misplaced := map[string]bool{}
	for i, r := range got {
		pos, wasSent := sent[r.ID]
		switch {
		case !wasSent || answered[r.ID]:
			e.Unexpected = append(e.Unexpected, r.ID)
		case pos != i:
			misplaced[r.ID] = true
		}
		answered[r.ID] = true
	}
	for _, it := range want { // request order
		switch {
		case !answered[it.ID]:
			e.Missing = append(e.Missing, it.ID)
		case misplaced[it.ID]:
			e.Misplaced = append(e.Misplaced, it.ID)
		}
	}
	return e
}

func convert(r wireResult) (Result, error) {
	if math.IsNaN(r.RiskScore) || r.RiskScore < 0 || r.RiskScore > 1 {
		return Result{}, fmt.Errorf("riskScore %v outside [0,1]", r.RiskScore)
	}
	switch r.Verdict {
	case VerdictAllow, VerdictReview, VerdictBlock:
	default:
		return Result{}, fmt.Errorf("unknown verdict %q", r.Verdict)
	}
	res := Result{ID: r.ID, RiskScore: float32(r.RiskScore), Verdict: r.Verdict, Categories: r.Categories}
	if res.Categories == nil {
		res.Categories = []string{}
	}
	res.Hits = make([]Hit, len(r.Hits))
	for i, h := range r.Hits {
		if h.Start < 0 || h.End <= h.Start || h.End > math.MaxInt32 {
			return Result{}, fmt.Errorf("hit %d: positions [%d,%d)", i, h.Start, h.End)
		}
		if math.IsNaN(h.Weight) || h.Weight <= 0 || h.Weight > 1 {
			return Result{}, fmt.Errorf("hit %d: weight %v outside (0,1]", i, h.Weight)
		}
		res.Hits[i] = Hit{Word: h.Word, Category: h.Category, Weight: float32(h.Weight), Start: int32(h.Start), End: int32(h.End)}
	}
	return res, nil
}

package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"
)

// ErrNoURL: the Conn names no Prometheus.
var ErrNoURL = errors.New("alerts: no prometheus url configured")

// Alert is one active alert, as Prometheus's /api/v1/alerts gives it.
type Alert struct {
	Name        string            `json:"name"`  // the alertname label
	State       string            `json:"state"` // pending or firing
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	ActiveAt    time.Time         `json:"activeAt"`
	Value       string            `json:"value"`
}

// Client reads one Prometheus server's alerts. It is safe for concurrent use.
type Client struct {
	base string
	http *http.Client
}

// New returns a client of c, or ErrNoURL when c has no URL.
func New(c Conn) (*Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	if c.URL == "" {
		return nil, ErrNoURL
	}
	return &Client{base: strings.TrimRight(c.URL, "/"), http: &http.Client{Timeout: c.Timeout}}, nil
}

// URL is the server's base URL.
func (c *Client) URL() string { return c.base }

// Active returns the pending and firing alerts, firing first, then by name and labels.
func (c *Client) Active(ctx context.Context) ([]Alert, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/api/v1/alerts", nil)
	if err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("alerts: read %s: %w", req.URL, err)
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Alerts []Alert `json:"alerts"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("alerts: %s answered %s, not Prometheus's API: %.120q", req.URL, resp.Status, body)
	}
	if resp.StatusCode != http.StatusOK || r.Status != "success" {
		return nil, fmt.Errorf("alerts: %s answered %s: %s", req.URL, resp.Status, r.Error)
	}
	out := r.Data.Alerts
	for i := range out {
		out[i].Name = out[i].Labels["alertname"]
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.State != b.State {
			return a.State == "firing"
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return fmt.Sprint(a.Labels) < fmt.Sprint(b.Labels)
	})
	return out, nil
}

// Firing returns the firing alerts (not the pending ones), by name and labels.
func (c *Client) Firing(ctx context.Context) ([]Alert, error) {
	all, err := c.Active(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, a := range all {
		if a.State == "firing" {
			out = append(out, a)
		}
	}
	return out, nil
}

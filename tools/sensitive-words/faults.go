package sensitivewords

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"
)

// Faults are test-only misbehaviours of /v1/check, for tests of the pipeline's handling of a
// slow or broken peer (reliability scenarios 5 and 6). They exist only on a server built with
// Config.TestFaults; POST /debug/faults replaces them at runtime. Each rate is a probability
// in [0,1] drawn per request.
type Faults struct {
	// Latency delays every /v1/check answer (after the request was read).
	Latency time.Duration
	// ErrorRate answers 503 or 500 (half each) with code "injected_fault" instead of checking.
	ErrorRate float64
	// Rate429 answers 429 rate_limited with Retry-After: 1 instead of checking.
	Rate429 float64
	// WrongCountRate drops the last item from an otherwise correct answer.
	WrongCountRate float64
	// WrongOrderRate reverses the items of an otherwise correct answer.
	WrongOrderRate float64
}

// maxFaultLatency bounds Faults.Latency.
const maxFaultLatency = 5 * time.Minute

// Validate checks the rates and the latency.
func (f Faults) Validate() error {
	if f.Latency < 0 || f.Latency > maxFaultLatency {
		return fmt.Errorf("latency: %v, want 0..%v", f.Latency, maxFaultLatency)
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"error rate", f.ErrorRate}, {"429 rate", f.Rate429}, {"wrong count rate", f.WrongCountRate}, {"wrong order rate", f.WrongOrderRate}} {
		if !(r.v >= 0 && r.v <= 1) {
			return fmt.Errorf("%s: %v, want a probability in [0,1]", r.name, r.v)
		}
	}
	return nil
}

// faultsJSON is the body of POST /debug/faults and of its answer; latency is a Go duration
// string ("250ms", "2s"). A field left out is 0: the body replaces every fault.
type faultsJSON struct {
	Latency        string  `json:"latency"`
	ErrorRate      float64 `json:"errorRate"`
	Rate429        float64 `json:"rate429"`
	WrongCountRate float64 `json:"wrongCountRate"`
	WrongOrderRate float64 `json:"wrongOrderRate"`
}

func (f Faults) toJSON() faultsJSON {
	return faultsJSON{
		Latency:        f.Latency.String(),
		ErrorRate:      f.ErrorRate,
		Rate429:        f.Rate429,
		WrongCountRate: f.WrongCountRate,
		WrongOrderRate: f.WrongOrderRate,
	}
}

// parseFaults decodes a POST /debug/faults body strictly (unknown fields are errors).
func parseFaults(body []byte) (Faults, error) {
	var j faultsJSON
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return Faults{}, err
	}
	if dec.More() {
		return Faults{}, fmt.Errorf("data after the JSON object")
	}
	f := Faults{ErrorRate: j.ErrorRate, Rate429: j.Rate429, WrongCountRate: j.WrongCountRate, WrongOrderRate: j.WrongOrderRate}
	if j.Latency != "" {
		d, err := time.ParseDuration(j.Latency)
		if err != nil {
			return Faults{}, fmt.Errorf("latency: %w", err)
		}
		f.Latency = d
	}
	return f, f.Validate()
}

// roll reports whether an event of probability p happens this time.
func roll(p float64) bool { return p > 0 && rand.Float64() < p }

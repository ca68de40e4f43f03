package moderation

import (
	"fmt"
	"strings"
	"testing"

	gojson "github.com/goccy/go-json"
)

// BenchmarkWireCodec is the client's JSON work for one full batch (100 items of loadgen-sized
// texts): encoding the request and decoding a reply with a few hits, per batch.
func BenchmarkWireCodec(b *testing.B) {
	req := wireRequest{Items: make([]wireItem, 100)}
	reply := wireReply{Dictionary: "v1", Items: make([]wireResult, 100)}
	for i := range req.Items {
		req.Items[i] = wireItem{ID: fmt.Sprintf("r-%06d/inference", i), Text: strings.Repeat("the model answered with a sentence ", 6+i%8)}
		reply.Items[i] = wireResult{ID: req.Items[i].ID, RiskScore: 0.1, Verdict: "ALLOW", Categories: []string{}}
		if i%5 == 0 {
			reply.Items[i] = wireResult{ID: req.Items[i].ID, RiskScore: 0.8, Verdict: "REVIEW", Categories: []string{"pii"},
				Hits: []wireHit{{Word: "password", Category: "pii", Weight: 0.8, Start: 10, End: 18}}}
		}
	}
	raw, err := gojson.Marshal(reply)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode-request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := gojson.Marshal(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-reply", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var r wireReply
			if err := gojson.Unmarshal(raw, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

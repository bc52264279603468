package engine_test

import (
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/internal/corpus"
)

// BenchmarkValidate checks the largest corpus conversation by message count: the cost every
// RPC pays before any work.
func BenchmarkValidate(b *testing.B) {
	var msgs []*compactorv1.Message
	for _, f := range corpus.Files(b) {
		resp, err := format.Lift(&compactorv1.LiftRequest{Body: string(corpus.Read(b, f))})
		if err != nil {
			b.Fatal(err)
		}
		if len(resp.GetMessages()) > len(msgs) {
			msgs = resp.GetMessages()
		}
	}
	b.ReportMetric(float64(len(msgs)), "messages")
	lim := engine.DefaultLimits()
	for b.Loop() {
		if err := lim.Validate(msgs); err != nil {
			b.Fatal(err)
		}
	}
}

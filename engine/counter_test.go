package engine

import (
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

func TestMemoStatsCountsWhatPlanStores(t *testing.T) {
	c := NewCounter(1 << 20)
	if n, b := c.MemoStats(); n != 0 || b != 0 {
		t.Fatalf("new Counter: %d entries, %d bytes", n, b)
	}
	msgs := conversation200()[:40]
	p := &compactorv1.Policy{ContextWindow: 200_000}
	// The conversation is stored as a whole the second time it is seen.
	for range 2 {
		if _, err := Plan(msgs, p, c); err != nil {
			t.Fatal(err)
		}
	}
	n, b := c.MemoStats()
	if n < len(msgs) || b <= 0 || b > 1<<20 {
		t.Fatalf("after planning %d messages twice: %d entries, %d bytes (budget 1 MiB)", len(msgs), n, b)
	}
}

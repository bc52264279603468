package hold

import (
	"context"
	"testing"
	"time"
)

// TestDetachForExtendsLeases: DetachFor extends every lease the call holds by the detached
// work's duration; Detach extends none; and the leases are released once the call and its
// detached work have ended, not before.
func TestDetachForExtendsLeases(t *testing.T) {
	ctx, end := Start(context.Background())
	var extended []time.Duration
	released := 0
	for range 2 {
		if !AddLease(ctx, func() { released++ }, func(d time.Duration) { extended = append(extended, d) }) {
			t.Fatal("AddLease on a live call reported false")
		}
	}
	plain := Detach(ctx)
	if len(extended) != 0 {
		t.Fatalf("Detach extended leases: %v", extended)
	}
	long := DetachFor(ctx, time.Minute)
	if len(extended) != 2 || extended[0] != time.Minute || extended[1] != time.Minute {
		t.Fatalf("DetachFor(1m) extended %v, want both leases by 1m", extended)
	}
	end()
	plain()
	if released != 0 {
		t.Fatalf("%d leases released while detached work runs", released)
	}
	long()
	if released != 2 {
		t.Errorf("%d leases released once everything ended, want 2", released)
	}
	if AddLease(ctx, func() {}, func(time.Duration) {}) {
		t.Error("AddLease on an ended call reported true")
	}
}

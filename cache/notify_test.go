package cache

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestRedisWaitersWakeOnWrite has one replica hold a key's lock and another wait for it in
// Fill, with a poll interval far longer than the test could afford: each wait must end
// because the holder's write is published, not because the waiter polled. It logs the time
// from the holder's commit to the waiter's return (the figure of issue 19: ≤ 10 ms at p99).
func TestRedisWaitersWakeOnWrite(t *testing.T) {
	p := testPrefix(t)
	holder, waiter := newTestRedis(t, p, time.Minute), newTestRedis(t, p, time.Minute)
	ctx := context.Background()
	const n = 100
	const poll = 3 * time.Second
	var lat []time.Duration
	slow := 0
	for i := range n {
		key := Scope{Tenant: "t"}.key(hashOf("wake-" + string(rune('a'+i%26)) + time.Now().String()))
		lease, err := holder.Lock(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan time.Time, 1)
		go func() {
			e, st, err := Fill(ctx, waiter, key, FillOptions{PollInterval: poll}, func(context.Context) (*Entry, error) {
				t.Error("the waiter computed while the holder held the lock")
				return entry("waiter"), nil
			})
			if err != nil || st != StatusHit || e.Text != "holder" {
				t.Errorf("Fill = %v, %v, %v; want the holder's entry as a hit", e, st, err)
			}
			done <- time.Now()
		}()
		time.Sleep(20 * time.Millisecond) // let the waiter find the lock taken
		if err := holder.Set(ctx, key, entry("holder")); err != nil {
			t.Fatal(err)
		}
		committed := time.Now()
		returned := <-done
		_ = lease.Unlock(ctx)
		d := returned.Sub(committed)
		if d >= poll/2 {
			slow++
		}
		lat = append(lat, d)
	}
	slices.Sort(lat)
	t.Logf("waiter returned after the holder's commit: p50 %v, p99 %v, max %v (n=%d)", lat[n/2], lat[n*99/100], lat[n-1], n)
	// A waiter that was not yet waiting when the write was published polls once; more than a
	// few of those means the notifications do not work.
	if slow > n/20 {
		t.Errorf("%d of %d waits ended by polling (≥ %v), not by the notification", slow, n, poll/2)
	}
}

// TestRedisWaitersWakeOnRelease checks that a holder that gives up (unlocks without a
// result) wakes a waiter on another replica at once, which then computes itself.
func TestRedisWaitersWakeOnRelease(t *testing.T) {
	p := testPrefix(t)
	holder, waiter := newTestRedis(t, p, time.Minute), newTestRedis(t, p, time.Minute)
	ctx := context.Background()
	key := Scope{Tenant: "t"}.key(hashOf("release"))
	lease, err := holder.Lock(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var computed atomic.Int32
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		_, st, err := Fill(ctx, waiter, key, FillOptions{PollInterval: time.Minute}, func(context.Context) (*Entry, error) {
			computed.Add(1)
			return entry("waiter"), nil
		})
		if err != nil || st != StatusMiss {
			t.Errorf("Fill = %v, %v; want a miss computed by the waiter", st, err)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter did not wake when the lock was released (its poll is a minute)")
	}
	if computed.Load() != 1 {
		t.Errorf("computed %d times, want 1", computed.Load())
	}
	t.Logf("waiter took the lock over %v after it was taken", time.Since(start))
}

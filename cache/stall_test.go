package cache

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/redistest"
	"github.com/compactord/compactord/summary"
)

// TestRedisStalledGivesUpWithinBudget: behind a partition, every cache command gives up
// within the budget, the breaker opens (commands then fail at once) and closes again once
// Redis answers.
func TestRedisStalledGivesUpWithinBudget(t *testing.T) {
	_, proxy := redistest.Proxied(t)
	var mu sync.Mutex
	var states []string
	r, err := NewRedis(RedisOptions{URL: "redis://" + proxy.Addr() + "/0", BreakerCooldown: 200 * time.Millisecond,
		OnBreaker: func(_, to string) { mu.Lock(); states = append(states, to); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	key := Scope{Tenant: "t", Summarizer: "s"}.key(hashOf("00ff"))
	if err := r.Set(ctx, key, &Entry{Output: summary.Output{Text: "summary"}}); err != nil {
		t.Fatal(err)
	}

	proxy.Stall(true)
	for i := range 5 {
		start := time.Now()
		_, err := r.Get(ctx, key)
		if d := time.Since(start); !errors.Is(err, ErrUnavailable) || d > DefaultRedisBudget+100*time.Millisecond {
			t.Fatalf("stalled get %d: %v after %v; want ErrUnavailable within the %v budget", i, err, d, DefaultRedisBudget)
		}
	}
	start := time.Now()
	_, err = r.Get(ctx, key)
	if d := time.Since(start); !errors.Is(err, ErrUnavailable) || d > 10*time.Millisecond {
		t.Errorf("with the breaker open: %v after %v; want ErrUnavailable at once", err, d)
	}

	proxy.Stall(false)
	time.Sleep(250 * time.Millisecond) // the cooldown
	var e *Entry
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if e, err = r.Get(ctx, key); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || e.Text != "summary" {
		t.Fatalf("after the partition healed: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(states) < 3 || states[0] != "open" || states[len(states)-1] != "closed" {
		t.Errorf("breaker states %v: want open, …, closed", states)
	}
}

// TestLockWithLostReplyIsTakenBack: a lock whose SET Redis applied but whose reply came back
// after the budget is deleted by its would-be holder (compare-and-delete with its token),
// so another caller can take it in about a second rather than after --lock-ttl.
func TestLockWithLostReplyIsTakenBack(t *testing.T) {
	node, proxy := redistest.Proxied(t)
	slow, err := NewRedis(RedisOptions{URL: "redis://" + proxy.Addr() + "/0", Breaker: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	direct, err := NewRedis(RedisOptions{URL: "redis://" + node.Addr + "/0", Budget: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	ctx := context.Background()
	key := Scope{Tenant: "t", Summarizer: "s"}.key(hashOf("lost"))
	lockKey := slow.lockKey(key)

	// Watch the lock key from the side, to know the SET was applied.
	seen := redistest.Ever(t, func() bool {
		n, _ := direct.rdb.Exists(ctx, lockKey).Result()
		return n == 1
	})
	if _, err := slow.Get(ctx, key); !errors.Is(err, ErrNotFound) { // a pooled connection, before the delay
		t.Fatal(err)
	}
	proxy.DelayReplies(300 * time.Millisecond)
	if _, err := slow.Lock(ctx, key, time.Minute); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a lock whose reply comes after the budget: %v, want ErrUnavailable", err)
	}
	var taken bool
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !taken; time.Sleep(20 * time.Millisecond) {
		if l, err := direct.Lock(ctx, key, time.Minute); err == nil {
			taken = true
			_ = l.Unlock(ctx)
		}
	}
	if !seen() {
		t.Fatal("the SET never reached Redis; the test proves nothing")
	}
	if !taken {
		t.Error("5 s after a lock's reply was lost, another caller still cannot take it")
	}
}

// TestPublishWithinBudgetAndBreaker: notifications go through the budget and the breaker
// like every other command: behind a partition each gives up within the budget, and their
// failures open the breaker.
func TestPublishWithinBudgetAndBreaker(t *testing.T) {
	_, proxy := redistest.Proxied(t)
	r, err := NewRedis(RedisOptions{URL: "redis://" + proxy.Addr() + "/0", BreakerCooldown: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	key := Scope{Tenant: "t", Summarizer: "s"}.key(hashOf("pub"))
	r.publish(ctx, key) // connected
	proxy.Stall(true)
	for i := range 5 {
		start := time.Now()
		r.publish(ctx, key)
		if d := time.Since(start); d > DefaultRedisBudget+200*time.Millisecond {
			t.Fatalf("publish %d behind a partition took %v, want the %v budget", i, d, DefaultRedisBudget)
		}
	}
	if _, err := r.Get(ctx, key); !errors.Is(err, errBreakerOpen) {
		t.Errorf("after 5 failed notifications: %v, want the breaker open", err)
	}
}

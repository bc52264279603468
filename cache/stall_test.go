package cache

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/redistest"
	"github.com/compactord/compactord/internal/tcpproxy"
)

// TestRedisStalledGivesUpWithinBudget: behind a partition, every cache command gives up
// within the budget, the breaker opens (commands then fail at once) and closes again once
// Redis answers.
func TestRedisStalledGivesUpWithinBudget(t *testing.T) {
	redistest.Need(t)
	node := redistest.Start(t, false)
	proxy, err := tcpproxy.New(node.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Stop()
	var mu sync.Mutex
	var states []string
	r, err := NewRedis(RedisOptions{URL: "redis://" + proxy.Addr() + "/0", BreakerCooldown: 200 * time.Millisecond,
		OnBreaker: func(_, to string) { mu.Lock(); states = append(states, to); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	key := Scope{Tenant: "t", Summarizer: "s"}.Key("00ff")
	if err := r.Set(ctx, key, &Entry{Text: "summary"}); err != nil {
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

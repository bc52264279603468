package cache

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/redistest"
)

// stallProxy forwards TCP to a Redis until stalled: then it keeps every connection open and
// stops forwarding, as a network partition does (no refusal, no reset).
type stallProxy struct {
	addr    string
	stalled atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
}

func newStallProxy(t *testing.T, upstream string) *stallProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{addr: lis.Addr().String()}
	t.Cleanup(func() {
		lis.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	go func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", upstream)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go p.pipe(out, in)
			go p.pipe(in, out)
		}
	}()
	return p
}

// pipe copies src to dst, holding (not dropping) bytes while stalled.
func (p *stallProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for p.stalled.Load() {
			time.Sleep(time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			return
		}
	}
}

// TestRedisStalledGivesUpWithinBudget: behind a partition, every cache command gives up
// within the budget, the breaker opens (commands then fail at once) and closes again once
// Redis answers.
func TestRedisStalledGivesUpWithinBudget(t *testing.T) {
	redistest.Need(t)
	node := redistest.Start(t, false)
	proxy := newStallProxy(t, node.Addr)
	var mu sync.Mutex
	var states []string
	r, err := NewRedis(RedisOptions{URL: "redis://" + proxy.addr + "/0", BreakerCooldown: 200 * time.Millisecond,
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

	proxy.stalled.Store(true)
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

	proxy.stalled.Store(false)
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

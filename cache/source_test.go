package cache

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/redistest"
)

// testSources runs the contract every Sources keeps: a source back whole, another tenant's
// not found, the budget per tenant, a renewal free, an expired source freeing its bytes.
func testSources(t *testing.T, s Sources, expire func()) {
	t.Helper()
	ctx := context.Background()
	ref := func(tenant string, i byte) SourceRef { return NewSourceRef(tenant, [32]byte{i}) }
	v := bytes.Repeat([]byte("x"), 60)
	if err := s.PutSource(ctx, ref("a", 1), v); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetSource(ctx, ref("a", 1)); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("get: %q, %v", got, err)
	}
	if _, err := s.GetSource(ctx, ref("b", 1)); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant's: %v, want not found", err)
	}
	if err := s.PutSource(ctx, ref("a", 1), v); err != nil {
		t.Errorf("renewal: %v", err)
	}
	var be *BudgetError
	if err := s.PutSource(ctx, ref("a", 2), v); !errors.As(err, &be) || be.Budget != 100 || be.Used != 60 || be.Size != 60 {
		t.Fatalf("past the budget: %v", err)
	}
	if _, err := s.GetSource(ctx, ref("a", 2)); !errors.Is(err, ErrNotFound) {
		t.Errorf("a refused source is stored: %v", err)
	}
	if err := s.PutSource(ctx, ref("b", 2), v); err != nil {
		t.Errorf("another tenant's budget: %v", err)
	}
	expire()
	if _, err := s.GetSource(ctx, ref("a", 1)); !errors.Is(err, ErrNotFound) {
		t.Errorf("after the TTL: %v, want not found", err)
	}
	if err := s.PutSource(ctx, ref("a", 2), v); err != nil {
		t.Errorf("after the TTL freed the budget: %v", err)
	}
}

func TestMemorySources(t *testing.T) {
	now := time.Now()
	s := NewMemorySources(MemorySourcesOptions{TTL: time.Minute, Budget: 100, Now: func() time.Time { return now }})
	testSources(t, s, func() { now = now.Add(time.Minute) })
}

func TestRedisSources(t *testing.T) {
	node := redistest.Start(t, false)
	r, err := NewRedis(RedisOptions{URL: "redis://" + node.Addr + "/0", Budget: testBudget})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	testSources(t, NewRedisSources(r, 300*time.Millisecond, 100), func() { time.Sleep(400 * time.Millisecond) })
}

// TestRedisSourcesOnCluster: a tenant's sources and ledger share one slot, so the script
// runs on a Cluster, from either replica.
func TestRedisSourcesOnCluster(t *testing.T) {
	redistest.Need(t)
	nodes := redistest.Cluster(t, 3)
	a, b := replicasOn(t, Topology{Mode: ModeCluster, Addrs: []string{nodes[0].Addr}})
	sa := NewRedisSources(a, 300*time.Millisecond, 100)
	sb := NewRedisSources(b, 300*time.Millisecond, 100)
	testSources(t, sa, func() { time.Sleep(400 * time.Millisecond) })
	ctx := context.Background()
	for _, tenant := range []string{"c", "d", "e", "f"} { // tenants on different slots
		if err := sa.PutSource(ctx, NewSourceRef(tenant, [32]byte{9}), []byte("m")); err != nil {
			t.Fatalf("tenant %s: %v", tenant, err)
		}
		if got, err := sb.GetSource(ctx, NewSourceRef(tenant, [32]byte{9})); err != nil || string(got) != "m" {
			t.Errorf("tenant %s from the other replica: %q, %v", tenant, got, err)
		}
	}
}

// TestSourcesRefusedRenewalKeepsSource: a source stored again under its ref at a size the
// budget cannot take is refused, and the source already stored there stays: the summary that
// named it still expands.
func TestSourcesRefusedRenewalKeepsSource(t *testing.T) {
	run := func(t *testing.T, s Sources) {
		ctx := context.Background()
		ref := func(i byte) SourceRef { return NewSourceRef("a", [32]byte{i}) }
		old := bytes.Repeat([]byte("o"), 60)
		if err := s.PutSource(ctx, ref(1), old); err != nil {
			t.Fatal(err)
		}
		if err := s.PutSource(ctx, ref(2), bytes.Repeat([]byte("y"), 30)); err != nil {
			t.Fatal(err)
		}
		if err := s.PutSource(ctx, ref(1), bytes.Repeat([]byte("n"), 80)); !errors.Is(err, ErrBudget) {
			t.Fatalf("a renewal past the budget: %v, want refused", err)
		}
		if got, err := s.GetSource(ctx, ref(1)); err != nil || !bytes.Equal(got, old) {
			t.Errorf("after a refused renewal: %q, %v; want the source stored before", got, err)
		}
	}
	t.Run("memory", func(t *testing.T) {
		run(t, NewMemorySources(MemorySourcesOptions{TTL: time.Hour, Budget: 100}))
	})
	t.Run("redis", func(t *testing.T) {
		node := redistest.Start(t, false)
		r, err := NewRedis(RedisOptions{URL: "redis://" + node.Addr + "/0", Budget: testBudget})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		run(t, NewRedisSources(r, time.Hour, 100))
	})
}

// TestMemorySourcesRenewedSourceDoesNotHoldExpiredOnes: a source renewed (kept again by a
// later compaction of the same conversation) does not keep the sources stored after it, and
// expired since, counted against the tenant's budget.
func TestMemorySourcesRenewedSourceDoesNotHoldExpiredOnes(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	s := NewMemorySources(MemorySourcesOptions{TTL: time.Hour, Budget: 100, Now: func() time.Time { return now }})
	ref := func(i byte) SourceRef { return NewSourceRef("a", [32]byte{i}) }
	v := bytes.Repeat([]byte("x"), 40)
	if err := s.PutSource(ctx, ref(1), v); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if err := s.PutSource(ctx, ref(2), v); err != nil {
		t.Fatal(err)
	}
	now = now.Add(50 * time.Minute)
	if err := s.PutSource(ctx, ref(1), v); err != nil { // renewed: now kept until +1h51m
		t.Fatal(err)
	}
	now = now.Add(11 * time.Minute) // ref 2 expired at +1h1m
	if _, err := s.GetSource(ctx, ref(2)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("expired source: %v", err)
	}
	if err := s.PutSource(ctx, ref(3), bytes.Repeat([]byte("z"), 50)); err != nil {
		t.Errorf("40 live bytes and 50 new ones within a budget of 100: %v", err)
	}
}

// TestMemorySourcesEvictsTheOldest: past MaxBytes the oldest source goes, not one stored
// again since (whose first place in the order is stale), nor the one just stored.
func TestMemorySourcesEvictsTheOldest(t *testing.T) {
	ctx := context.Background()
	s := NewMemorySources(MemorySourcesOptions{TTL: time.Hour, Budget: 100, MaxBytes: 100})
	ref := func(tenant string, i byte) SourceRef { return NewSourceRef(tenant, [32]byte{i}) }
	if err := s.PutSource(ctx, ref("a", 1), bytes.Repeat([]byte("x"), 30)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSource(ctx, ref("b", 2), bytes.Repeat([]byte("y"), 30)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSource(ctx, ref("a", 1), bytes.Repeat([]byte("X"), 40)); err != nil { // stored again, larger
		t.Fatal(err)
	}
	if err := s.PutSource(ctx, ref("c", 3), bytes.Repeat([]byte("z"), 40)); err != nil { // 110 bytes: one must go
		t.Fatal(err)
	}
	if _, err := s.GetSource(ctx, ref("b", 2)); !errors.Is(err, ErrNotFound) {
		t.Errorf("the oldest source is kept: %v", err)
	}
	for _, r := range []SourceRef{ref("a", 1), ref("c", 3)} {
		if _, err := s.GetSource(ctx, r); err != nil {
			t.Errorf("a newer source is evicted: %v", err)
		}
	}
}

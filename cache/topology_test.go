package cache

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/redistest"
)

// replicasOn returns two caches (two replicas' worth) on one topology.
func replicasOn(t *testing.T, topo Topology) (*Redis, *Redis) {
	t.Helper()
	var rs [2]*Redis
	for i := range rs {
		rdb, err := topo.Client()
		if err != nil {
			t.Fatal(err)
		}
		rs[i] = NewRedisClient(rdb, RedisOptions{TTL: time.Minute, Budget: testBudget})
		t.Cleanup(func() { rs[i].Close() })
	}
	return rs[0], rs[1]
}

// fillOnBoth runs Fill for key on both replicas at once and returns how many times the
// summary was computed: once, whichever replica takes the lock.
func fillOnBoth(t *testing.T, a, b *Redis, key Key, text string) int32 {
	t.Helper()
	var calls atomic.Int32
	var wg sync.WaitGroup
	for _, r := range []*Redis{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			e, _, err := Fill(ctx, r, key, FillOptions{PollInterval: 5 * time.Second}, func(context.Context) (*Entry, error) {
				calls.Add(1)
				time.Sleep(200 * time.Millisecond) // an LLM call
				return entry(text), nil
			})
			if err != nil || e.Text != text {
				t.Errorf("Fill = %v, %v", e, err)
			}
		}()
	}
	wg.Wait()
	return calls.Load()
}

// hitOn fails t unless r serves key with text, retrying while the topology settles.
func hitOn(t *testing.T, r *Redis, key Key, text string) {
	t.Helper()
	redistest.WaitFor(t, 20*time.Second, "a cache hit for "+text, func() bool {
		e, err := r.Get(context.Background(), key)
		return err == nil && e.Text == text
	})
}

// TestRedisClusterAcrossReplicasAndSlotMove runs the cache on a real 3-master Cluster,
// reached through one seed node: a summary filled on one replica is a hit on the other, two
// replicas filling one prefix compute it once, and both still hold after the prefix's slot
// moves to another master.
func TestRedisClusterAcrossReplicasAndSlotMove(t *testing.T) {
	redistest.Need(t)
	nodes := redistest.Cluster(t, 3)
	a, b := replicasOn(t, Topology{Mode: ModeCluster, Addrs: []string{nodes[0].Addr}})
	scope := Scope{Tenant: "acme", Summarizer: "fake"}

	k1 := scope.key(hashOf("cluster-1"))
	if n := fillOnBoth(t, a, b, k1, "one"); n != 1 {
		t.Fatalf("two replicas computed one prefix %d times, want 1", n)
	}
	hitOn(t, b, k1, "one")
	hitOn(t, a, k1, "one")

	// Every key of the scope shares the slot of its hash tag; move it.
	out, err := redistest.Cli(nodes[0].Port, "CLUSTER", "KEYSLOT", a.entryKey(k1))
	if err != nil {
		t.Fatal(err, out)
	}
	slot, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT: %q", out)
	}
	from := redistest.Owner(t, slot, nodes)
	to := nodes[0]
	if to == from {
		to = nodes[1]
	}
	redistest.MoveSlot(t, slot, from, to, nodes)
	if redistest.Owner(t, slot, nodes) != to {
		t.Fatal("the slot did not move")
	}

	hitOn(t, a, k1, "one")
	hitOn(t, b, k1, "one")
	k2 := scope.key(hashOf("cluster-2"))
	if n := fillOnBoth(t, a, b, k2, "two"); n != 1 {
		t.Fatalf("after the slot move, two replicas computed one prefix %d times, want 1", n)
	}
	hitOn(t, b, k2, "two")
}

// TestRedisSentinelAcrossReplicasAndFailover runs the cache on a real Sentinel setup (a
// master, its replica, three Sentinels): hits across replicas and one computation per prefix
// before the master is killed, and again after Sentinel promotes the replica.
func TestRedisSentinelAcrossReplicasAndFailover(t *testing.T) {
	redistest.Need(t)
	master, replica, sentinels := redistest.Sentinels(t, "mymaster")
	addrs := make([]string, len(sentinels))
	for i, s := range sentinels {
		addrs[i] = s.Addr
	}
	a, b := replicasOn(t, Topology{Mode: ModeSentinel, Addrs: addrs, MasterName: "mymaster"})
	scope := Scope{Tenant: "acme", Summarizer: "fake"}

	k1 := scope.key(hashOf("sentinel-1"))
	if n := fillOnBoth(t, a, b, k1, "one"); n != 1 {
		t.Fatalf("two replicas computed one prefix %d times, want 1", n)
	}
	hitOn(t, b, k1, "one")
	redistest.WaitFor(t, 10*time.Second, "the entry replicated", func() bool {
		out, err := redistest.Cli(replica.Port, "EXISTS", a.entryKey(k1))
		return err == nil && strings.TrimSpace(out) == "1"
	})

	master.Kill()
	redistest.WaitFor(t, 30*time.Second, "Sentinel to promote the replica", func() bool {
		out, err := redistest.Cli(sentinels[0].Port, "SENTINEL", "get-master-addr-by-name", "mymaster")
		return err == nil && strings.Contains(out, strconv.Itoa(replica.Port))
	})

	hitOn(t, a, k1, "one")
	hitOn(t, b, k1, "one")
	k2 := scope.key(hashOf("sentinel-2"))
	var n int32
	redistest.WaitFor(t, 20*time.Second, "both replicas writing to the new master", func() bool {
		// The clients follow the switch on Sentinel's notice; until then a write may fail
		// over to computing without the cache, which Fill reports but which must not last.
		if err := a.Set(context.Background(), scope.key(hashOf("probe")), entry("p")); err != nil {
			return false
		}
		return b.Set(context.Background(), scope.key(hashOf("probe")), entry("p")) == nil
	})
	if n = fillOnBoth(t, a, b, k2, "two"); n != 1 {
		t.Fatalf("after the failover, two replicas computed one prefix %d times, want 1", n)
	}
	hitOn(t, a, k2, "two")
}

// TestTopologyCredentialsPerConnection: a topology with Credentials authenticates each new
// connection with what they give at that moment, so a rotated password is picked up
// without a restart. (A cluster client pointed at a plain node tells the two apart: past
// AUTH it fails on CLUSTER SLOTS, before it with WRONGPASS.)
func TestTopologyCredentialsPerConnection(t *testing.T) {
	redistest.Need(t)
	node := redistest.Start(t, false)
	if out, err := redistest.Cli(node.Port, "CONFIG", "SET", "requirepass", "one"); err != nil {
		t.Fatal(err, out)
	}
	var password atomic.Value
	password.Store("one")
	rdb, err := Topology{Mode: ModeCluster, Addrs: []string{node.Addr},
		Credentials: func() (string, string) { return "", password.Load().(string) }}.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	authenticated := func() bool {
		err := rdb.Ping(context.Background()).Err()
		switch {
		case err != nil && strings.Contains(err.Error(), "cluster support disabled"):
			return true
		case err != nil && (strings.Contains(err.Error(), "WRONGPASS") || strings.Contains(err.Error(), "NOAUTH")):
			return false
		}
		t.Fatalf("unexpected answer: %v", err)
		return false
	}
	if !authenticated() {
		t.Fatal("not authenticated with the current password")
	}
	// Rotate: the server takes the new password, every connection is dropped, the
	// credentials give the new one.
	if out, err := redistest.Cli(node.Port, "-a", "one", "--no-auth-warning", "CONFIG", "SET", "requirepass", "two"); err != nil {
		t.Fatal(err, out)
	}
	password.Store("two")
	if out, err := redistest.Cli(node.Port, "-a", "two", "--no-auth-warning", "CLIENT", "KILL", "TYPE", "normal"); err != nil {
		t.Fatal(err, out)
	}
	if !eventuallyTrue(authenticated) {
		t.Error("new connections do not use the rotated password")
	}
	password.Store("stale")
	_, _ = redistest.Cli(node.Port, "-a", "two", "--no-auth-warning", "CLIENT", "KILL", "TYPE", "normal")
	if eventuallyTrue(authenticated) {
		t.Error("a wrong password authenticated: the credentials are not what the connection uses")
	}
}

// eventuallyTrue retries cond for up to 2 s (connections reconnect in the background).
func eventuallyTrue(cond func() bool) bool {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

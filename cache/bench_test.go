package cache

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// benchLongest measures one Longest over a 200-message hash chain whose prefix of 150
// messages has a 4 KB summary cached: the lookup every Compact makes.
func benchLongest(b *testing.B, c Cache) {
	ctx := context.Background()
	scope := Scope{Tenant: "bench", Summarizer: "extractive"}
	hashes := make([][32]byte, 200)
	for i := range hashes {
		hashes[i] = hashOf(fmt.Sprintf("bench-%d", i))
	}
	keys := scope.Keys(hashes)
	if err := c.Set(ctx, keys[150], entry(strings.Repeat("s", 4096))); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		i, _, err := c.Longest(ctx, keys)
		if err != nil || i != 150 {
			b.Fatalf("Longest = %d, %v", i, err)
		}
	}
}

func BenchmarkMemoryLongest(b *testing.B) { benchLongest(b, NewMemory(MemoryOptions{})) }

func BenchmarkRedisLongest(b *testing.B) {
	u := redisURLFor(b)
	p := testPrefixFor(b, u)
	r, err := NewRedis(RedisOptions{URL: u, KeyPrefix: p, Budget: testBudget})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	benchLongest(b, r)
}

package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/hold"
	"github.com/compactord/compactord/summary"
)

// hashOf stands for the hash chain value of a prefix named s.
func hashOf(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// key is the one key of Keys.
func (s Scope) key(prefixHash [32]byte) Key { return s.Keys([][32]byte{prefixHash})[0] }

func TestScopeKeySeparatesTenantsSummarizersAndInstructions(t *testing.T) {
	base := Scope{Tenant: "acme", Summarizer: "mini/gpt-4o-mini/v1", Instructions: "focus on tests"}
	h := hashOf("prefix")
	tests := []struct {
		name  string
		scope Scope
		same  bool
	}{
		{"identical", base, true},
		{"other tenant", Scope{Tenant: "globex", Summarizer: base.Summarizer, Instructions: base.Instructions}, false},
		{"anonymous tenant", Scope{Summarizer: base.Summarizer, Instructions: base.Instructions}, false},
		{"other summarizer", Scope{Tenant: "acme", Summarizer: "mini/gpt-4o/v1", Instructions: base.Instructions}, false},
		{"other instructions", Scope{Tenant: "acme", Summarizer: base.Summarizer}, false},
		{"field boundary moved", Scope{Tenant: "acme", Summarizer: base.Summarizer + "focus", Instructions: " on tests"}, false},
	}
	want := base.key(h)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.scope.key(h)
			if (got == want) != tt.same {
				t.Errorf("Key = %q, base %q: same = %v, want %v", got, want, got == want, tt.same)
			}
		})
	}
	if strings.Contains(want.String(), "acme") || strings.Contains(want.String(), "focus") {
		t.Errorf("key %q leaks the tenant or instructions", want)
	}
	if !strings.HasSuffix(want.String(), ":"+hex.EncodeToString(h[:])) {
		t.Errorf("key %q does not end with the prefix hash", want)
	}
	if ks := base.Keys([][32]byte{h, hashOf("x")}); len(ks) != 2 || ks[0] != want || ks[1] == ks[0] {
		t.Errorf("Keys = %v", ks)
	}
}

// backend builds two handles on one shared store (for Redis: two clients), so tests can
// check what one replica sees of another's writes and locks.
type backend struct {
	name string
	new  func(t *testing.T) (a, b Cache)
}

func backends() []backend {
	return []backend{
		{"memory", func(t *testing.T) (Cache, Cache) {
			m := NewMemory(MemoryOptions{})
			return m, m
		}},
		{"redis", func(t *testing.T) (Cache, Cache) {
			p := testPrefix(t)
			return newTestRedis(t, p, 0), newTestRedis(t, p, 0)
		}},
	}
}

func entry(text string) *Entry {
	return &Entry{Output: summary.Output{Text: text, Model: "gpt-4o-mini", PromptVersion: "v1", InputTokens: 1200, OutputTokens: 300},
		CoveredMessages: 7, Kept: []int32{1, 4}, Summarizer: "mini", Created: time.Unix(1700000000, 0).UTC(),
		Check: summary.Check{RequestsTotal: 3, RequestsRetained: 2, RequestsAppended: 1, PathsTotal: 5, PathsRetained: 4, PathsAppended: 1, Trimmed: true}}
}

func TestCacheContract(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			scope := Scope{Tenant: "acme", Summarizer: "extractive//v1"}

			t.Run("get missing", func(t *testing.T) {
				c, _ := be.new(t)
				if _, err := c.Get(ctx, scope.key(hashOf("missing"))); !errors.Is(err, ErrNotFound) {
					t.Fatalf("Get = %v, want ErrNotFound", err)
				}
			})

			t.Run("set then get from another replica", func(t *testing.T) {
				a, b := be.new(t)
				k := scope.key(hashOf("p1"))
				if err := a.Set(ctx, k, entry("summary one")); err != nil {
					t.Fatal(err)
				}
				got, err := b.Get(ctx, k)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, entry("summary one")) {
					t.Errorf("Get = %+v, want %+v", got, entry("summary one"))
				}
				if err := a.Set(ctx, k, entry("summary two")); err != nil {
					t.Fatal(err)
				}
				if got, _ := b.Get(ctx, k); got == nil || got.Text != "summary two" {
					t.Errorf("after overwrite Get = %+v", got)
				}
			})

			t.Run("zero created is stored as now", func(t *testing.T) {
				a, b := be.new(t)
				k := scope.key(hashOf("created"))
				e := entry("s")
				e.Created = time.Time{}
				if err := a.Set(ctx, k, e); err != nil {
					t.Fatal(err)
				}
				got, err := b.Get(ctx, k)
				if err != nil || got.Created.IsZero() {
					t.Errorf("Get = %+v, %v; want Created set", got, err)
				}
				if !e.Created.IsZero() {
					t.Error("Set modified the caller's entry")
				}
			})

			t.Run("longest prefix", func(t *testing.T) {
				a, b := be.new(t)
				hashes := make([][32]byte, 6)
				for i := range hashes {
					hashes[i] = hashOf(fmt.Sprintf("h%d", i))
				}
				keys := scope.Keys(hashes)
				if i, e, err := b.Longest(ctx, keys); !errors.Is(err, ErrNotFound) || i != -1 || e != nil {
					t.Fatalf("empty Longest = %d, %v, %v", i, e, err)
				}
				if i, _, err := b.Longest(ctx, nil); !errors.Is(err, ErrNotFound) || i != -1 {
					t.Fatalf("Longest(nil) = %d, %v", i, err)
				}
				for _, i := range []int{1, 3} {
					if err := a.Set(ctx, keys[i], entry(fmt.Sprintf("covers %d", i))); err != nil {
						t.Fatal(err)
					}
				}
				tests := []struct {
					keys     []Key
					wantIdx  int
					wantText string
				}{
					{keys, 3, "covers 3"},
					{keys[:3], 1, "covers 1"},
					{keys[:1], -1, ""},
					{keys[2:], 1, "covers 3"},
				}
				for _, tt := range tests {
					i, e, err := b.Longest(ctx, tt.keys)
					if tt.wantIdx < 0 {
						if !errors.Is(err, ErrNotFound) || i != -1 {
							t.Errorf("Longest(%d keys) = %d, %v; want not found", len(tt.keys), i, err)
						}
						continue
					}
					if err != nil || i != tt.wantIdx || e.Text != tt.wantText {
						t.Errorf("Longest(%d keys) = %d, %+v, %v; want %d %q", len(tt.keys), i, e, err, tt.wantIdx, tt.wantText)
					}
				}
			})

			t.Run("tenant isolation", func(t *testing.T) {
				a, b := be.new(t)
				h := hashOf("shared prefix")
				tenantA := Scope{Tenant: "tenant-a", Summarizer: scope.Summarizer}
				tenantB := Scope{Tenant: "tenant-b", Summarizer: scope.Summarizer}
				if err := a.Set(ctx, tenantA.key(h), entry("secret of A")); err != nil {
					t.Fatal(err)
				}
				if e, err := b.Get(ctx, tenantB.key(h)); !errors.Is(err, ErrNotFound) {
					t.Errorf("tenant B Get = %+v, %v; want ErrNotFound", e, err)
				}
				if i, e, err := b.Longest(ctx, tenantB.Keys([][32]byte{h})); !errors.Is(err, ErrNotFound) {
					t.Errorf("tenant B Longest = %d, %+v, %v; want ErrNotFound", i, e, err)
				}
				if _, err := b.Get(ctx, tenantA.key(h)); err != nil {
					t.Errorf("tenant A cannot read its own entry: %v", err)
				}
			})

			t.Run("lock exclusive between replicas", func(t *testing.T) {
				a, b := be.new(t)
				k := scope.key(hashOf("locked"))
				la, err := a.Lock(ctx, k, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := b.Lock(ctx, k, time.Minute); !errors.Is(err, ErrLocked) {
					t.Fatalf("second Lock = %v, want ErrLocked", err)
				}
				if _, err := a.Lock(ctx, k, time.Minute); !errors.Is(err, ErrLocked) {
					t.Fatalf("Lock by the same replica = %v, want ErrLocked", err)
				}
				if _, err := b.Lock(ctx, scope.key(hashOf("other")), time.Minute); err != nil {
					t.Fatalf("Lock on another key = %v", err)
				}
				if err := la.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				lb, err := b.Lock(ctx, k, time.Minute)
				if err != nil {
					t.Fatalf("Lock after Unlock = %v", err)
				}
				// A stale lease must not release the new holder's lock.
				if err := la.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := a.Lock(ctx, k, time.Minute); !errors.Is(err, ErrLocked) {
					t.Fatalf("stale Unlock released another holder's lock: Lock = %v", err)
				}
				if err := lb.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			})

			t.Run("lock expiry survives a dead holder", func(t *testing.T) {
				a, b := be.new(t)
				k := scope.key(hashOf("dead holder"))
				if _, err := a.Lock(ctx, k, 50*time.Millisecond); err != nil {
					t.Fatal(err)
				}
				// The holder never unlocks. b must get the lock once the ttl ran out.
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				tries := 0
				for {
					tries++
					l, err := b.Lock(wctx, k, time.Minute)
					if err == nil {
						_ = l.Unlock(ctx)
						break
					}
					if !errors.Is(err, ErrLocked) {
						t.Fatalf("Lock = %v", err)
					}
					select {
					case <-wctx.Done():
						t.Fatalf("lock never expired after %d tries", tries)
					case <-time.After(10 * time.Millisecond):
					}
				}
			})

			t.Run("fill computes once across callers", func(t *testing.T) {
				a, b := be.new(t)
				k := scope.key(hashOf("fill"))
				var computed atomic.Int32
				release := make(chan struct{})
				compute := func(context.Context) (*Entry, error) {
					computed.Add(1)
					<-release
					return entry("filled"), nil
				}
				const n = 6
				var wg sync.WaitGroup
				statuses := make([]Status, n)
				errs := make([]error, n)
				texts := make([]string, n)
				for i := range n {
					c := a
					if i%2 == 1 {
						c = b
					}
					wg.Go(func() {
						e, st, err := Fill(ctx, c, k, FillOptions{PollInterval: 5 * time.Millisecond}, compute)
						statuses[i], errs[i] = st, err
						if e != nil {
							texts[i] = e.Text
						}
					})
				}
				// Let the holder finish only once it is computing.
				for computed.Load() == 0 {
					time.Sleep(time.Millisecond)
				}
				close(release)
				wg.Wait()
				if got := computed.Load(); got != 1 {
					t.Errorf("computed %d times, want 1", got)
				}
				misses := 0
				for i := range n {
					if errs[i] != nil || texts[i] != "filled" {
						t.Errorf("caller %d: %q, %v", i, texts[i], errs[i])
					}
					if statuses[i] == StatusMiss {
						misses++
					} else if statuses[i] != StatusHit {
						t.Errorf("caller %d: status %v", i, statuses[i])
					}
				}
				if misses != 1 {
					t.Errorf("%d misses, want 1", misses)
				}
			})

			t.Run("fill takes over from a dead holder", func(t *testing.T) {
				a, b := be.new(t)
				k := scope.key(hashOf("fill dead holder"))
				if _, err := a.Lock(ctx, k, 50*time.Millisecond); err != nil {
					t.Fatal(err)
				}
				fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				e, st, err := Fill(fctx, b, k, FillOptions{PollInterval: 10 * time.Millisecond},
					func(context.Context) (*Entry, error) { return entry("took over"), nil })
				if err != nil || st != StatusMiss || e.Text != "took over" {
					t.Fatalf("Fill = %+v, %v, %v", e, st, err)
				}
				if got, err := a.Get(ctx, k); err != nil || got.Text != "took over" {
					t.Errorf("stored entry = %+v, %v", got, err)
				}
			})

			t.Run("fill returns compute errors and releases the lock", func(t *testing.T) {
				a, b := be.new(t)
				k := scope.key(hashOf("fill error"))
				boom := errors.New("boom")
				_, _, err := Fill(ctx, a, k, FillOptions{}, func(context.Context) (*Entry, error) { return nil, boom })
				if !errors.Is(err, boom) {
					t.Fatalf("Fill = %v, want boom", err)
				}
				l, err := b.Lock(ctx, k, time.Minute)
				if err != nil {
					t.Fatalf("lock not released after a failed compute: %v", err)
				}
				_ = l.Unlock(ctx)
				if _, err := b.Get(ctx, k); !errors.Is(err, ErrNotFound) {
					t.Errorf("failed compute stored something: %v", err)
				}
			})

			t.Run("fill gives up when the context ends", func(t *testing.T) {
				a, b := be.new(t)
				k := scope.key(hashOf("fill deadline"))
				l, err := a.Lock(ctx, k, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = l.Unlock(ctx) }()
				fctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
				defer cancel()
				called := false
				_, _, err = Fill(fctx, b, k, FillOptions{PollInterval: 5 * time.Millisecond},
					func(context.Context) (*Entry, error) { called = true; return entry("x"), nil })
				if !errors.Is(err, context.DeadlineExceeded) || called {
					t.Errorf("Fill = %v (computed %v), want DeadlineExceeded without computing", err, called)
				}
			})
		})
	}
}

func TestMemoryEvictsLeastRecentlyUsedBeyondMaxBytes(t *testing.T) {
	ctx := context.Background()
	scope := Scope{Tenant: "t"}
	text := strings.Repeat("x", 1000)
	k0 := scope.key(hashOf("0"))
	one := entry(text).size(k0)
	m := NewMemory(MemoryOptions{MaxBytes: 3 * one})
	keys := scope.Keys([][32]byte{hashOf("0"), hashOf("1"), hashOf("2"), hashOf("3")})
	for _, k := range keys[:3] {
		if err := m.Set(ctx, k, entry(text)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Get(ctx, keys[0]); err != nil { // 0 becomes most recently used
		t.Fatal(err)
	}
	if err := m.Set(ctx, keys[3], entry(text)); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false, true, true} {
		_, err := m.Get(ctx, keys[i])
		if got := err == nil; got != want {
			t.Errorf("key %d present = %v, want %v", i, got, want)
		}
	}
	if m.Bytes() > 3*one || m.Len() != 3 {
		t.Errorf("holds %d bytes in %d entries, bound %d", m.Bytes(), m.Len(), 3*one)
	}
	// An entry bigger than the whole cache is not stored and evicts nothing.
	if err := m.Set(ctx, scope.key(hashOf("huge")), entry(strings.Repeat("y", int(4*one)))); err != nil {
		t.Fatal(err)
	}
	if m.Len() != 3 {
		t.Errorf("oversized entry changed the cache: %d entries", m.Len())
	}
}

func TestMemoryTTL(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1700000000, 0)
	m := NewMemory(MemoryOptions{TTL: time.Hour, Now: func() time.Time { return now }})
	k := Scope{}.key(hashOf("ttl"))
	if err := m.Set(ctx, k, entry("s")); err != nil {
		t.Fatal(err)
	}
	now = now.Add(59 * time.Minute)
	if _, err := m.Get(ctx, k); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	now = now.Add(time.Minute)
	if _, err := m.Get(ctx, k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after expiry: %v, want ErrNotFound", err)
	}
	if i, _, err := m.Longest(ctx, []Key{k}); !errors.Is(err, ErrNotFound) || i != -1 {
		t.Fatalf("Longest after expiry = %d, %v", i, err)
	}
	if m.Len() != 0 || m.Bytes() != 0 {
		t.Errorf("expired entry still held: %d entries, %d bytes", m.Len(), m.Bytes())
	}
}

func TestMemoryLockExpiresByClock(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1700000000, 0)
	m := NewMemory(MemoryOptions{Now: func() time.Time { return now }})
	k := Scope{}.key(hashOf("lock"))
	if _, err := m.Lock(ctx, k, time.Second); err != nil {
		t.Fatal(err)
	}
	now = now.Add(999 * time.Millisecond)
	if _, err := m.Lock(ctx, k, time.Second); !errors.Is(err, ErrLocked) {
		t.Fatalf("Lock before expiry = %v, want ErrLocked", err)
	}
	now = now.Add(time.Millisecond)
	if _, err := m.Lock(ctx, k, time.Second); err != nil {
		t.Fatalf("Lock after expiry = %v", err)
	}
}

type failingCache struct{ err error }

func (f failingCache) Get(context.Context, Key) (*Entry, error) { return nil, f.err }
func (f failingCache) Longest(context.Context, []Key) (int, *Entry, error) {
	return -1, nil, f.err
}
func (f failingCache) Set(context.Context, Key, *Entry) error                  { return f.err }
func (f failingCache) Lock(context.Context, Key, time.Duration) (Lease, error) { return nil, f.err }

func TestFillComputesWithoutCacheWhenUnavailable(t *testing.T) {
	c := failingCache{err: fmt.Errorf("%w: connection refused", ErrUnavailable)}
	e, st, err := Fill(context.Background(), c, Scope{}.key(hashOf("x")), FillOptions{},
		func(context.Context) (*Entry, error) { return entry("computed"), nil })
	if err != nil || st != StatusUnavailable || e.Text != "computed" {
		t.Fatalf("Fill = %+v, %v, %v; want computed, unavailable", e, st, err)
	}
}

func TestMemoryFillWakesWaitersAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := NewMemory(MemoryOptions{})
	k := Scope{}.key(hashOf("wake"))
	started, release := make(chan struct{}), make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		_, _, err := Fill(ctx, m, k, FillOptions{}, func(context.Context) (*Entry, error) {
			close(started)
			<-release
			return entry("woken"), nil
		})
		holder <- err
	}()
	<-started
	waiter := make(chan *Entry, 1)
	go func() {
		// With an hour between polls only the notification can wake this waiter in time.
		e, st, err := Fill(ctx, m, k, FillOptions{PollInterval: time.Hour}, func(context.Context) (*Entry, error) {
			return entry("computed twice"), nil
		})
		if err != nil || st != StatusHit {
			t.Errorf("waiter: %v, %v", st, err)
		}
		waiter <- e
	}()
	close(release)
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
	if e := <-waiter; e == nil || e.Text != "woken" {
		t.Errorf("waiter got %+v", e)
	}
}

// A Fill that waits on another holder gives its call's slot among the calls in flight back
// (package hold): waiting is not engine work.
func TestFillWaiterGivesItsSlotBack(t *testing.T) {
	m := NewMemory(MemoryOptions{})
	k := Scope{}.key(hashOf("slot"))
	lease, err := m.Lock(context.Background(), k, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx, end := hold.Start(context.Background())
	defer end()
	yielded := make(chan struct{})
	hold.AddSlot(ctx, func() { close(yielded) })
	waiter := make(chan error, 1)
	go func() {
		_, _, err := Fill(ctx, m, k, FillOptions{}, func(context.Context) (*Entry, error) { return entry("x"), nil })
		waiter <- err
	}()
	select {
	case <-yielded:
	case <-time.After(5 * time.Second):
		t.Error("the waiting Fill kept its slot")
	}
	if err := m.Set(context.Background(), k, entry("stored")); err != nil {
		t.Fatal(err)
	}
	_ = lease.Unlock(context.Background())
	if err := <-waiter; err != nil {
		t.Fatal(err)
	}
}

// TestEntryDecodesEarlierVersions: entries stay in Redis for days (--cache-ttl) across
// upgrades, under the same keys, so an entry as an earlier version stored it (testdata)
// decodes whole, and what this version stores is the same JSON object, which the earlier
// version reads back (a rolling upgrade runs both).
func TestEntryDecodesEarlierVersions(t *testing.T) {
	raw, err := os.ReadFile("testdata/entry-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	want := entry("The user asked to port src/parse.py to Rust.")
	got, ok := decode(string(raw))
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("decode(%s) = %+v, %v; want %+v", raw, got, ok, want)
	}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var old, now map[string]any
	if err := json.Unmarshal(raw, &old); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &now); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(old, now) {
		t.Errorf("this version stores\n%s\nthe earlier one\n%s", b, raw)
	}
}

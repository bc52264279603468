package cache

import (
	"context"
	"time"
)

// Tiered puts a small in-process cache in front of a shared one (Redis): a summary this
// replica has already seen is served from memory without a network round trip, and keeps
// being served while the shared cache is down. Everything found or stored in the shared cache
// is also kept locally; locks are the shared cache's, so replicas still compute a summary
// once. Entries under one key never change meaning (the key hashes the prefix, the tenant and
// the summarizer), so a local copy is never stale, only possibly older than a re-computation
// after the shared entry expired.
type Tiered struct {
	local  *Memory
	shared Cache
}

var _ Cache = (*Tiered)(nil)

// NewTiered returns a Cache reading local first and shared second.
func NewTiered(local *Memory, shared Cache) *Tiered {
	return &Tiered{local: local, shared: shared}
}

// Get returns the local entry, else the shared one (keeping a local copy).
func (t *Tiered) Get(ctx context.Context, key Key) (*Entry, error) {
	if e, err := t.local.Get(ctx, key); err == nil {
		return e, nil
	}
	e, err := t.shared.Get(ctx, key)
	if err == nil {
		_ = t.local.Set(ctx, key, e) // the memory cache never fails
	}
	return e, err
}

// Longest answers from memory when the longest candidate (the exact prefix) is held locally,
// and otherwise asks the shared cache, keeping a local copy of what it finds.
func (t *Tiered) Longest(ctx context.Context, keys []Key) (int, *Entry, error) {
	if n := len(keys); n > 0 {
		if e, err := t.local.Get(ctx, keys[n-1]); err == nil {
			return n - 1, e, nil
		}
	}
	i, e, err := t.shared.Longest(ctx, keys)
	if err == nil {
		_ = t.local.Set(ctx, keys[i], e)
	}
	return i, e, err
}

// Set stores e in both caches; the error is the shared cache's.
func (t *Tiered) Set(ctx context.Context, key Key, e *Entry) error {
	_ = t.local.Set(ctx, key, e)
	return t.shared.Set(ctx, key, e)
}

// changed implements notifier for Fill with the shared cache's notifications, whose lock
// Fill waits on; a shared cache without them leaves Fill to poll.
func (t *Tiered) changed(key Key) <-chan struct{} {
	if n, ok := t.shared.(notifier); ok {
		return n.changed(key)
	}
	return nil
}

// Lock takes the shared cache's lock.
func (t *Tiered) Lock(ctx context.Context, key Key, ttl time.Duration) (Lease, error) {
	return t.shared.Lock(ctx, key, ttl)
}

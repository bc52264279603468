package cache

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// MemoryOptions configure NewMemory. The zero value is usable.
type MemoryOptions struct {
	// MaxBytes bounds the approximate memory held by entries; the least recently used
	// entries are evicted beyond it. Default 64 MiB.
	MaxBytes int64
	// TTL expires entries this long after they were stored; 0 keeps them until evicted.
	TTL time.Duration
	// Now is the clock (for tests); default time.Now.
	Now func() time.Time
	// TracerProvider receives the cache spans; default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
}

// Memory is an in-process Cache: an LRU bounded by bytes, with in-process locks. It is the
// default when no Redis is configured and never returns ErrUnavailable.
type Memory struct {
	maxBytes int64
	ttl      time.Duration
	now      func() time.Time
	tr       tracer

	mu      sync.Mutex
	lru     *list.List // front = most recently used; values are *memItem
	items   map[string]*list.Element
	bytes   int64
	locks   map[string]memLock
	lockSeq uint64
	waiters map[string]chan struct{} // closed at the next Set or Unlock of the key
}

type memItem struct {
	key     Key
	entry   Entry
	size    int64
	expires time.Time // zero: never
}

type memLock struct {
	token   uint64
	expires time.Time
}

var _ Cache = (*Memory)(nil)

// NewMemory returns an empty in-memory cache.
func NewMemory(opt MemoryOptions) *Memory {
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = 64 << 20
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Memory{
		maxBytes: opt.MaxBytes,
		ttl:      opt.TTL,
		now:      opt.Now,
		tr:       newTracer(opt.TracerProvider, AttrBackend.String("memory")),
		lru:      list.New(),
		items:    make(map[string]*list.Element),
		locks:    make(map[string]memLock),
		waiters:  make(map[string]chan struct{}),
	}
}

// Len returns the number of entries held (expired ones included until looked up).
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lru.Len()
}

// Bytes returns the approximate memory held by entries.
func (m *Memory) Bytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes
}

// get returns a copy of the live entry under key; the caller holds mu.
func (m *Memory) get(key Key, now time.Time) (*Entry, bool) {
	el, ok := m.items[key.s]
	if !ok {
		return nil, false
	}
	it := el.Value.(*memItem)
	if !it.expires.IsZero() && !now.Before(it.expires) {
		m.remove(el)
		return nil, false
	}
	m.lru.MoveToFront(el)
	e := it.entry
	return &e, true
}

func (m *Memory) remove(el *list.Element) {
	it := m.lru.Remove(el).(*memItem)
	delete(m.items, it.key.s)
	m.bytes -= it.size
}

// Get implements Cache.
func (m *Memory) Get(ctx context.Context, key Key) (*Entry, error) {
	_, span := m.tr.t.Start(ctx, "cache.get", trace.WithAttributes(m.tr.attrs...))
	m.mu.Lock()
	e, ok := m.get(key, m.now())
	m.mu.Unlock()
	span.SetAttributes(AttrHit.Bool(ok))
	var err error
	if !ok {
		err = ErrNotFound
	}
	end(span, err)
	return e, err
}

// Longest implements Cache.
func (m *Memory) Longest(ctx context.Context, keys []Key) (int, *Entry, error) {
	_, span := m.tr.t.Start(ctx, "cache.longest", trace.WithAttributes(m.tr.attrs...),
		trace.WithAttributes(AttrKeys.Int(len(keys))))
	m.mu.Lock()
	now := m.now()
	idx, found := -1, (*Entry)(nil)
	for i := len(keys) - 1; i >= 0; i-- {
		if e, ok := m.get(keys[i], now); ok {
			idx, found = i, e
			break
		}
	}
	m.mu.Unlock()
	span.SetAttributes(AttrHit.Bool(idx >= 0), AttrHitIndex.Int(idx))
	var err error
	if idx < 0 {
		err = ErrNotFound
	}
	end(span, err)
	return idx, found, err
}

// Set implements Cache. An entry larger than MaxBytes is not stored (and not an error).
func (m *Memory) Set(ctx context.Context, key Key, e *Entry) error {
	_, span := m.tr.t.Start(ctx, "cache.set", trace.WithAttributes(m.tr.attrs...))
	defer span.End()
	if key.IsZero() || e == nil {
		return fmt.Errorf("cache: set: zero key or nil entry")
	}
	it := &memItem{key: key, entry: *e, size: e.size(key)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if it.entry.Created.IsZero() {
		it.entry.Created = m.now()
	}
	if el, ok := m.items[key.s]; ok {
		m.remove(el)
	}
	if it.size > m.maxBytes {
		return nil
	}
	if m.ttl > 0 {
		it.expires = m.now().Add(m.ttl)
	}
	m.wake(key.s)
	m.items[key.s] = m.lru.PushFront(it)
	m.bytes += it.size
	for m.bytes > m.maxBytes {
		m.remove(m.lru.Back())
	}
	return nil
}

// Lock implements Cache with an in-process lock that expires after ttl.
func (m *Memory) Lock(ctx context.Context, key Key, ttl time.Duration) (Lease, error) {
	_, span := m.tr.t.Start(ctx, "cache.lock", trace.WithAttributes(m.tr.attrs...))
	ttl = lockTTL(ttl)
	m.mu.Lock()
	now := m.now()
	l, held := m.locks[key.s]
	acquired := !held || !now.Before(l.expires)
	var lease Lease
	if acquired {
		if len(m.locks) >= 1024 {
			m.sweepLocks(now)
		}
		m.lockSeq++
		m.locks[key.s] = memLock{token: m.lockSeq, expires: now.Add(ttl)}
		lease = &memLease{m: m, key: key.s, token: m.lockSeq}
	}
	m.mu.Unlock()
	span.SetAttributes(attribute.Bool(string(AttrAcquired), acquired))
	var err error
	if !acquired {
		err = ErrLocked
	}
	end(span, err)
	return lease, err
}

type memLease struct {
	m     *Memory
	key   string
	token uint64
}

// Unlock implements Lease.
func (l *memLease) Unlock(context.Context) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if cur, ok := l.m.locks[l.key]; ok && cur.token == l.token {
		delete(l.m.locks, l.key)
		l.m.wake(l.key)
	}
	return nil
}

// sweepLocks drops expired locks (left by holders that never unlocked); the caller holds mu.
func (m *Memory) sweepLocks(now time.Time) {
	for k, l := range m.locks {
		if !now.Before(l.expires) {
			delete(m.locks, k)
		}
	}
}

// changed implements notifier for Fill.
func (m *Memory) changed(key Key) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch, ok := m.waiters[key.s]
	if !ok {
		ch = make(chan struct{})
		m.waiters[key.s] = ch
	}
	return ch
}

// wake releases the waiters of key; the caller holds mu.
func (m *Memory) wake(key string) {
	if ch, ok := m.waiters[key]; ok {
		close(ch)
		delete(m.waiters, key)
	}
}

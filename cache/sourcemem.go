package cache

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// DefaultSourceMaxBytes bounds an in-memory source store: a share of a replica's memory
// like the summary cache's, whatever the tenants' budgets add up to.
const DefaultSourceMaxBytes = 64 << 20

// MemorySourcesOptions configure NewMemorySources. The zero value is usable.
type MemorySourcesOptions struct {
	// TTL expires sources this long after they were stored; default DefaultSourceTTL.
	TTL time.Duration
	// Budget bounds the bytes of one tenant's live sources; default DefaultSourceBudget.
	Budget int64
	// MaxBytes bounds the bytes of all tenants' sources: beyond it the oldest are evicted
	// (and are then NOT_FOUND, as expired ones are). Default DefaultSourceMaxBytes.
	MaxBytes int64
	// Now is the clock (for tests); default time.Now.
	Now func() time.Time
}

// MemorySources is an in-process Sources, the default when no Redis is configured: a source
// is one byte slice, stored and returned whole under one lock.
type MemorySources struct {
	ttl      time.Duration
	budget   int64
	maxBytes int64
	now      func() time.Time

	mu    sync.Mutex
	items map[SourceRef]*memSource
	order *list.List // of SourceRef, by time stored, oldest first (a renewal moves it last)
	used  map[string]int64
	bytes int64
}

type memSource struct {
	b       []byte
	expires time.Time
	at      *list.Element // its place in order
}

var _ Sources = (*MemorySources)(nil)

// NewMemorySources returns an empty in-memory source store.
func NewMemorySources(opt MemorySourcesOptions) *MemorySources {
	if opt.TTL <= 0 {
		opt.TTL = DefaultSourceTTL
	}
	if opt.Budget <= 0 {
		opt.Budget = DefaultSourceBudget
	}
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = DefaultSourceMaxBytes
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &MemorySources{ttl: opt.TTL, budget: opt.Budget, maxBytes: opt.MaxBytes, now: opt.Now,
		items: map[SourceRef]*memSource{}, order: list.New(), used: map[string]int64{}}
}

// PutSource implements Sources. b is copied.
func (m *MemorySources) PutSource(_ context.Context, ref SourceRef, b []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.expire(now)
	size := int64(len(b))
	if it, ok := m.items[ref]; ok && int64(len(it.b)) == size {
		// The same messages, ids and token counts aside: the newest bytes are kept, so that
		// the compaction that stored them last gets its own conversation back.
		copy(it.b, b)
		it.expires = now.Add(m.ttl)
		m.order.MoveToBack(it.at)
		return nil
	}
	// A renewal of another size is charged the difference; one refused leaves the source
	// stored before, as RedisSources does.
	held := int64(0)
	if it, ok := m.items[ref]; ok {
		held = int64(len(it.b))
	}
	if used := m.used[ref.tenant]; size > held && used-held+size > m.budget {
		return &BudgetError{Budget: m.budget, Used: used, Size: size}
	}
	m.drop(ref)
	m.items[ref] = &memSource{b: append([]byte(nil), b...), expires: now.Add(m.ttl), at: m.order.PushBack(ref)}
	m.used[ref.tenant] += size
	m.bytes += size
	for m.bytes > m.maxBytes && m.order.Len() > 1 {
		m.drop(m.order.Front().Value.(SourceRef))
	}
	return nil
}

// GetSource implements Sources. The bytes returned are a copy.
func (m *MemorySources) GetSource(_ context.Context, ref SourceRef) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	it, ok := m.items[ref]
	if !ok || !m.now().Before(it.expires) {
		return nil, ErrNotFound
	}
	return append([]byte(nil), it.b...), nil
}

// expire drops the sources whose TTL ended, oldest first; the caller holds mu.
func (m *MemorySources) expire(now time.Time) {
	for e := m.order.Front(); e != nil; e = m.order.Front() {
		ref := e.Value.(SourceRef)
		if now.Before(m.items[ref].expires) {
			break
		}
		m.drop(ref)
	}
}

// drop removes ref's source, if held; the caller holds mu.
func (m *MemorySources) drop(ref SourceRef) {
	it, ok := m.items[ref]
	if !ok {
		return
	}
	delete(m.items, ref)
	m.order.Remove(it.at)
	size := int64(len(it.b))
	m.bytes -= size
	if m.used[ref.tenant] -= size; m.used[ref.tenant] <= 0 {
		delete(m.used, ref.tenant)
	}
}

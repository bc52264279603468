package engine

import "sync"

// memoShards is the number of independently locked shards of a memo.
const memoShards = 32

// memoKey is a memo key: comparable, with a 64-bit fingerprint that the index is keyed by
// (two keys with one fingerprint cannot both be stored; the newer replaces the older).
type memoKey interface {
	comparable
	fp() uint64
}

// memo is a bounded, concurrency-safe map from K to V evicting by the CLOCK (second chance)
// policy once the bytes charged for its entries exceed its budget. Shards are locked
// independently; callers pick the shard from their key's hash so that a batch of lookups can
// take each shard's lock once.
type memo[K memoKey, V any] struct {
	shards []memoShard[K, V]
}

type memoShard[K memoKey, V any] struct {
	mu    sync.Mutex
	idx   map[uint64]int32 // fingerprint → slot
	slots []memoSlot[K, V]
	free  []int32
	hand  int
	used  int64
	limit int64
	_     [40]byte // keep neighbouring shards' locks off one cache line
}

type memoSlot[K memoKey, V any] struct {
	key  K
	val  V
	size int64
	ref  bool
	live bool
}

// newMemo returns a memo of memoShards shards within budget bytes.
func newMemo[K memoKey, V any](budget int64) *memo[K, V] {
	return newMemoShards[K, V](budget, memoShards)
}

// newMemoShards returns a memo of n shards within budget bytes, each shard holding an equal
// share of the budget (no value larger than that is stored).
func newMemoShards[K memoKey, V any](budget int64, n int) *memo[K, V] {
	m := &memo[K, V]{shards: make([]memoShard[K, V], n)}
	per := budget / int64(n)
	for i := range m.shards {
		m.shards[i].idx = make(map[uint64]int32)
		m.shards[i].limit = per
	}
	return m
}

// lookup returns the value stored under k in shard s. The caller holds the shard's lock.
func (sh *memoShard[K, V]) lookup(k K) (V, bool) {
	i, ok := sh.idx[k.fp()]
	if !ok || sh.slots[i].key != k {
		var zero V
		return zero, false
	}
	sl := &sh.slots[i]
	sl.ref = true
	return sl.val, true
}

// store puts v under k, charging size bytes and evicting older entries as needed. Values
// larger than the shard's whole budget are not stored. The caller holds the shard's lock.
func (sh *memoShard[K, V]) store(k K, v V, size int64) {
	if size > sh.limit {
		return
	}
	fp := k.fp()
	if i, ok := sh.idx[fp]; ok {
		// The same key, or another with the same fingerprint: replace it.
		sl := &sh.slots[i]
		sh.used += size - sl.size
		sl.key, sl.val, sl.size, sl.ref = k, v, size, true
	} else {
		for sh.used+size > sh.limit && len(sh.idx) > 0 {
			sh.evict()
		}
		var i int32
		if n := len(sh.free); n > 0 {
			i = sh.free[n-1]
			sh.free = sh.free[:n-1]
		} else {
			sh.slots = append(sh.slots, memoSlot[K, V]{})
			i = int32(len(sh.slots) - 1)
		}
		sh.slots[i] = memoSlot[K, V]{key: k, val: v, size: size, live: true}
		sh.idx[fp] = i
		sh.used += size
	}
	for sh.used > sh.limit && len(sh.idx) > 1 {
		sh.evict()
	}
}

// evict removes one entry that was not used since the hand last passed it.
func (sh *memoShard[K, V]) evict() {
	for {
		if sh.hand >= len(sh.slots) {
			sh.hand = 0
		}
		i := sh.hand
		sh.hand++
		sl := &sh.slots[i]
		if !sl.live {
			continue
		}
		if sl.ref {
			sl.ref = false
			continue
		}
		delete(sh.idx, sl.key.fp())
		sh.used -= sl.size
		sh.slots[i] = memoSlot[K, V]{}
		sh.free = append(sh.free, int32(i))
		return
	}
}

// get is lookup under the shard's lock.
func (m *memo[K, V]) get(shard int, k K) (V, bool) {
	sh := &m.shards[shard]
	sh.mu.Lock()
	v, ok := sh.lookup(k)
	sh.mu.Unlock()
	return v, ok
}

// put is store under the shard's lock.
func (m *memo[K, V]) put(shard int, k K, v V, size int64) {
	sh := &m.shards[shard]
	sh.mu.Lock()
	sh.store(k, v, size)
	sh.mu.Unlock()
}

// stats returns the number of entries and the bytes charged, for tests.
func (m *memo[K, V]) stats() (entries int, used int64) {
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		entries += len(sh.idx)
		used += sh.used
		sh.mu.Unlock()
	}
	return entries, used
}

package engine

import "sync"

// scratch is the working memory of one Decide call, reused through the Counter's scratchPool
// so that a warm plan allocates little more than its response.
type scratch struct {
	counts     []msgCount
	keys       []contentKey
	sel        []bool
	order      []int32
	misses     []int32
	class      []msgClass
	blocked    []int32
	turnStarts []int32
	results    []toolLink
	open       []openRef
	approvals  []openRef
	saved      []int64
	tail       []int64
	dupTable   []int32
	dup        []bool
	pruned     []PrunedPart
	reqs       []int32
	kinds      []UserKind
	splitHead  []int64
	splitRest  []int64
	splitHost  []int64
	headAt     []int64
	steps      []int64
}

// resize returns s with length n and zeroed elements, reallocating only when it must.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	s = s[:n]
	clear(s)
	return s
}

// scratchPool keeps scratch memory between plans. The zero value is ready to use.
type scratchPool struct {
	pool sync.Pool // of *scratch
}

func (p *scratchPool) get() *scratch {
	if sc, ok := p.pool.Get().(*scratch); ok {
		return sc
	}
	return new(scratch)
}

// put drops the references sc holds (memo values, ids) and returns it to the pool.
//
// counts and pruned are cleared only within their length, then truncated, so that a plan
// which did not use them (a memo hit) does not clear their whole capacity: nothing past
// their length holds a reference. counts is set at most once per plan, by resize (which
// zeroes it), and written within its length; pruned is set once per plan, by appends from
// length zero (selectPruneParts, selectObservations), and only read after (a decision
// copies what it keeps of it, prunedFrom). open and
// approvals are cleared to their capacity: analyze removes from them by shifting
// (append(s[:k], s[k+1:]...)), which leaves stale ids past their length.
func (p *scratchPool) put(sc *scratch) {
	clear(sc.counts)
	sc.counts = sc.counts[:0]
	clear(sc.open[:cap(sc.open)])
	clear(sc.approvals[:cap(sc.approvals)])
	clear(sc.pruned)
	sc.pruned = sc.pruned[:0]
	p.pool.Put(sc)
}

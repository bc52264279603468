package service

import (
	"sync"

	"github.com/compactord/compactord/cache"
)

// flights runs at most one summary computation per cache key at a time in this process, as
// golang.org/x/sync/singleflight does, but tells each caller at once whether it leads the
// computation or joins one already running (singleflight decides that inside DoChan and
// does not say). Compact needs to know: the leader hands what its call holds (its slot, its
// tenant's lease, its request's memory) to the detached computation, and a joiner gives its
// slot back while it waits.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

// flight is one computation, of the summary under key: done is closed once its result is
// set.
type flight struct {
	key    string
	done   chan struct{}
	entry  *cache.Entry
	status cache.Status
	err    error
	// prepared marks a preparation's computation (prepare.go), set by its leader before
	// finish: its failure is not its joiners' to answer with, they compute their own.
	prepared bool
}

// join returns the computation running for key, or a new one that the caller leads: it must
// run it and call finish.
func (f *flights) join(key string) (fl *flight, lead bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl, ok := f.m[key]; ok {
		return fl, false
	}
	if f.m == nil {
		f.m = make(map[string]*flight)
	}
	fl = &flight{key: key, done: make(chan struct{})}
	f.m[key] = fl
	return fl, true
}

// finish sets the result of fl and wakes its callers; the next join of its key starts a new
// computation.
func (f *flights) finish(fl *flight, e *cache.Entry, st cache.Status, err error) {
	f.mu.Lock()
	delete(f.m, fl.key)
	f.mu.Unlock()
	fl.entry, fl.status, fl.err = e, st, err
	close(fl.done)
}

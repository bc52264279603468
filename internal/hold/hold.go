// Package hold keeps, in a call's context, what admitting the call took: its slot among the
// calls in flight, its leases (a tenant's concurrent Compacts) and its share of the memory
// budget. The admission code that takes them (package limit, the service's request decoder)
// is far from the code that knows how long they are needed (the Compact handler), so they
// meet here:
//
//   - what the call holds is given back once the call has ended (Start's end runs: the
//     service runs it when gRPC has finished the call, its response marshalled and
//     written) and every piece of work detached from it (a summarization that outlives a
//     cancelled caller) has ended;
//   - the slot is given back earlier when the call yields it, while it waits on work another
//     call is doing.
package hold

import (
	"context"
	"slices"
	"sync"
	"time"
)

type key struct{}

// call is what one call holds.
type call struct {
	mu       sync.Mutex
	refs     int    // the handler, plus each detached piece of work
	slot     func() // nil once given back
	releases []func()
	extends  []func(time.Duration)
}

// Start returns ctx carrying an empty hold for one call, and end, which runs when the call
// ends: from then on, what the call holds is given back as soon as no detached work keeps
// it.
func Start(ctx context.Context) (context.Context, func()) {
	c := &call{refs: 1}
	return context.WithValue(ctx, key{}, c), sync.OnceFunc(c.unref)
}

// Held reports whether ctx carries a call's hold (Start).
func Held(ctx context.Context) bool { return from(ctx) != nil }

func from(ctx context.Context) *call {
	c, _ := ctx.Value(key{}).(*call)
	return c
}

// Add makes release run when the call ctx belongs to, and its detached work, have ended. It
// reports false, without keeping release, when ctx carries no hold or the call has ended:
// the caller releases itself then.
func Add(ctx context.Context, release func()) bool {
	return with(ctx, func(c *call) { c.releases = append(c.releases, release) })
}

// AddLease is Add for a lease that expires by itself (a replica that dies does not hold it
// for ever): extend makes it last at least d from now, and runs when the call detaches work
// for d (DetachFor), which may outlive the lease's own expiry.
func AddLease(ctx context.Context, release func(), extend func(d time.Duration)) bool {
	return with(ctx, func(c *call) {
		c.releases = append(c.releases, release)
		c.extends = append(c.extends, extend)
	})
}

// AddSlot is Add for the call's slot among the calls in flight, which Yield may also give
// back earlier. release may run from Yield or at the end, once.
func AddSlot(ctx context.Context, release func()) bool {
	return with(ctx, func(c *call) { c.slot = release })
}

// with runs f on the call ctx belongs to, under its lock, unless there is no call or it has
// ended; it reports whether f ran.
func with(ctx context.Context, f func(c *call)) bool {
	c := from(ctx)
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refs == 0 {
		return false
	}
	f(c)
	return true
}

// Yield gives back the slot of the call ctx belongs to, if it still holds one: the call is
// about to wait on work it does not do itself (another call's summary, a model).
func Yield(ctx context.Context) {
	c := from(ctx)
	if c == nil {
		return
	}
	c.mu.Lock()
	slot := c.slot
	c.slot = nil
	c.mu.Unlock()
	if slot != nil {
		slot()
	}
}

// Detach keeps what the call ctx belongs to holds until done runs, whenever the handler
// returns: the caller is starting work that may outlive the call. It returns a no-op when
// ctx carries no hold.
func Detach(ctx context.Context) (done func()) {
	done = func() {}
	with(ctx, func(c *call) {
		c.refs++
		done = sync.OnceFunc(c.unref)
	})
	return done
}

// DetachFor is Detach for work that may run for up to d: the leases the call holds
// (AddLease) are extended to last that long.
func DetachFor(ctx context.Context, d time.Duration) (done func()) {
	var extends []func(time.Duration)
	with(ctx, func(c *call) { extends = slices.Clone(c.extends) })
	for _, extend := range extends {
		extend(d)
	}
	return Detach(ctx)
}

// unref drops one reference; the last one gives back everything the call holds.
func (c *call) unref() {
	c.mu.Lock()
	c.refs--
	if c.refs > 0 {
		c.mu.Unlock()
		return
	}
	slot, releases := c.slot, c.releases
	c.slot, c.releases = nil, nil
	c.mu.Unlock()
	if slot != nil {
		slot()
	}
	for _, r := range releases {
		r()
	}
}

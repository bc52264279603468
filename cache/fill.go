package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/compactord/compactord/internal/hold"
)

// Status is how the cache served a summary: the one cache outcome, which Compact reports as
// the API's CacheStatus and the metrics count by its String. Fill returns StatusHit,
// StatusMiss or StatusUnavailable; StatusBypass is its callers', for a summary they serve
// without storing it.
type Status int

const (
	// StatusMiss: not cached; this caller computed it and stored it.
	StatusMiss Status = iota + 1
	// StatusHit: found in the cache, possibly after waiting for another holder to compute
	// it.
	StatusHit
	// StatusUnavailable: the backend failed, so the entry was computed without the cache
	// (and may not be stored).
	StatusUnavailable
	// StatusBypass: computed, served and deliberately not stored, although the cache
	// answered: a fallback summarizer's summary.
	StatusBypass
)

// Statuses returns every Status.
func Statuses() []Status { return []Status{StatusHit, StatusMiss, StatusUnavailable, StatusBypass} }

// String returns "hit", "miss", "unavailable" or "bypass": the metric label of the outcome.
func (s Status) String() string {
	switch s {
	case StatusMiss:
		return "miss"
	case StatusHit:
		return "hit"
	case StatusUnavailable:
		return "unavailable"
	case StatusBypass:
		return "bypass"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// FillOptions tune Fill. The zero value uses the defaults.
type FillOptions struct {
	// LockTTL bounds how long one holder may compute before waiters take over (a dead holder
	// is survived by this expiry). Default 2 minutes; set it above the summarizer timeout.
	LockTTL time.Duration
	// PollInterval is how often waiters look for the holder's result when no notification
	// wakes them first (caches that notify: Memory, Redis, Tiered). Default 200ms, with
	// up to 25% random jitter.
	PollInterval time.Duration
}

// Fill returns the entry under key, computing it with compute when it is absent, so that
// across every caller sharing the cache (all replicas for Redis) at most one computes a key
// at a time: the lock holder computes and stores; the others poll for its result and take
// the lock over if it is released or expires without one. Fill does not look the key up
// before locking; callers usually did that already with Longest.
//
// A waiter gives back the slot its call holds among the calls in flight (hold.Yield).
//
// When the backend fails, Fill computes without the cache and returns StatusUnavailable.
// Errors from compute are returned unchanged (with status 0); a context that ends before
// compute starts (while locking or waiting) returns an error wrapping ctx.Err().
func Fill(ctx context.Context, c Cache, key Key, opt FillOptions, compute func(context.Context) (*Entry, error)) (*Entry, Status, error) {
	opt.LockTTL = lockTTL(opt.LockTTL)
	if opt.PollInterval <= 0 {
		opt.PollInterval = 200 * time.Millisecond
	}
	n, _ := c.(notifier)
	for {
		var changed <-chan struct{}
		if n != nil {
			changed = n.changed(key) // before Lock, so a release in between is not missed
		}
		lease, err := c.Lock(ctx, key, opt.LockTTL)
		switch {
		case err == nil:
			defer unlock(ctx, lease) // the holder returns in this iteration
		case errors.Is(err, ErrLocked):
			// Waiting on another holder's work is not this call's work: its slot among the
			// calls in flight goes back (package hold).
			hold.Yield(ctx)
			if err := wait(ctx, changed, opt.PollInterval); err != nil {
				return nil, 0, fmt.Errorf("cache: waiting for the lock holder: %w", err)
			}
		case ctx.Err() != nil:
			return nil, 0, fmt.Errorf("cache: lock: %w", ctx.Err())
		default: // unavailable
			return computeUncached(ctx, compute)
		}
		// The holder's result; or, holding the lock, one stored since the caller's lookup.
		e, err := c.Get(ctx, key)
		switch {
		case err == nil:
			return e, StatusHit, nil
		case errors.Is(err, ErrNotFound) && lease != nil:
			return computeStored(ctx, c, key, compute)
		case errors.Is(err, ErrNotFound):
			// Still being computed, or the holder gave up: try the lock again.
		case ctx.Err() != nil:
			return nil, 0, fmt.Errorf("cache: get: %w", ctx.Err())
		default:
			return computeUncached(ctx, compute)
		}
	}
}

// wait waits for changed (the key was stored or its lock released) or, without a
// notification, for the poll interval with up to 25% jitter; it returns ctx's error if ctx
// ends first.
func wait(ctx context.Context, changed <-chan struct{}, poll time.Duration) error {
	t := time.NewTimer(poll + rand.N(poll/4+1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	case <-changed:
	}
	return nil
}

// notifier is implemented by caches that can wake waiters at once: changed returns a channel
// closed at the next Set of key or release of its lock.
type notifier interface {
	changed(key Key) <-chan struct{}
}

// unlock releases a held lock even when ctx has ended; an unreleased lock expires by itself.
func unlock(ctx context.Context, lease Lease) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = lease.Unlock(uctx)
}

// computeStored computes the entry of key and stores it, even if the caller stops waiting:
// the summary cost an LLM call.
func computeStored(ctx context.Context, c Cache, key Key, compute func(context.Context) (*Entry, error)) (*Entry, Status, error) {
	e, err := compute(ctx)
	if err != nil {
		return nil, 0, err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := c.Set(sctx, key, e); err != nil {
		return e, StatusUnavailable, nil
	}
	return e, StatusMiss, nil
}

func computeUncached(ctx context.Context, compute func(context.Context) (*Entry, error)) (*Entry, Status, error) {
	e, err := compute(ctx)
	if err != nil {
		return nil, 0, err
	}
	return e, StatusUnavailable, nil
}

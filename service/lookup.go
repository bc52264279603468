package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/hold"
	"github.com/compactord/compactord/summary"
)

// The first stage of a summarizing Compact: which cached summary serves it as it is, and what a
// new summary builds on (a cached earlier prefix, the conversation's latest summary, or nothing).

// maxAnchorCandidates bounds how many earlier prefixes one Compact looks up in the cache
// (one MGET) when searching for a summary to build on, besides those chunks may end at
// (maxGridCandidates).
const maxAnchorCandidates = 256

// base is what a new summary builds on: the summary of msgs[0:from] (anchor; "" when from
// is 0), whose text left out the requests at released because they stayed verbatim beside
// it, and which this compaction folds into the summary instead.
type base struct {
	from     int
	anchor   string
	released []int32
}

// summary returns the summary of msgs[0:cut] and how the cache served it: the exact prefix
// from the cache, or a new summary built on the longest cached earlier prefix (or on the
// conversation's latest summary), computed once across replicas and stored. A cached summary
// of this very prefix that does not serve this compaction (see usable) stays as it is; this
// compaction's own is found, or written (see rewrite) and stored, under the key's variant
// for its summary room and kept requests (see ownRoom).
//
// A caller that joins a computation another call of this process started gets its result:
// its summary (a hit, unless the leader's was not stored: then the leader's outcome) or its
// error, as if it were its own; only a computation that ran out of its starter's time, and a
// preparation that failed (prepare.go), are started again.
func (c *compaction) summary(ctx context.Context) (*cache.Entry, cache.Status, error) {
	f, err := c.find(ctx)
	switch {
	case err != nil:
		e, err := c.summarize(ctx, f.b)
		return e, cache.StatusUnavailable, err
	case f.hit != nil:
		return f.hit, cache.StatusHit, nil
	}
	key, b, stale := f.key, f.b, f.stale

	// One computation per key in this process (flights), and one across replicas
	// (cache.Fill's lock). Each caller gives up at its own deadline. The computation runs
	// detached from the caller that started it, to that caller's deadline, holding what the
	// caller's call holds (its slot, its tenant's concurrent-Compacts lease, its request's
	// memory: package hold); a caller that joined a computation which ran out of its
	// starter's time starts a new one. Compactions that share a flight serve each other:
	// they keep the same requests and have the same summary room.
	flightKey := c.flightKey(key)
	for {
		fl, lead := c.s.flights.join(flightKey)
		if lead {
			b, stale := b, stale // the computation's copies: the hit path moves nothing to the heap
			c.detach(ctx, fl, func(ctx context.Context) (*cache.Entry, cache.Status, error) {
				return c.compute(ctx, key, b, stale)
			})
		} else {
			hold.Yield(ctx) // waiting on another call's work is not engine work
		}
		select {
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("compact: waiting for the summary: %w", ctx.Err())
		case <-fl.done:
		}
		if fl.err != nil {
			if !lead && ctx.Err() == nil && (fl.prepared || errors.Is(fl.err, context.DeadlineExceeded) || errors.Is(fl.err, context.Canceled)) {
				continue // the starter's time ran out, not ours, or a preparation failed: ours is tried
			}
			return nil, 0, fl.err
		}
		if !lead && fl.status == cache.StatusMiss {
			return fl.entry, cache.StatusHit, nil // stored by the call it joined
		}
		return fl.entry, fl.status, nil
	}
}

// found is what the cache lookup of a compaction found: the key of its prefix; the cached
// summary that serves it as it is (hit), else the base a new summary builds on and, when this
// prefix's cached summary does not serve it, that summary (stale).
type found struct {
	key   cache.Key
	hit   *cache.Entry
	b     base
	stale *cache.Entry
}

// find looks the compaction's summary up in the cache: one Cache.Longest over the keys of
// every prefix from the conversation's latest summary up to the cut. An error is the cache's
// (other than cache.ErrNotFound): f.b is then where a summary starts without it.
func (c *compaction) find(ctx context.Context) (f found, err error) {
	scope := c.scope(ctx)

	// Candidate prefixes: every length after the latest summary up to the cut, newest last.
	lo := min(max(int(c.plan.GetSummaryIndex())+1, 1, c.cut-maxAnchorCandidates+1), c.cut)
	grid, chain := c.candidates(lo) // lo..cut, after the prefixes chunks may end at before lo
	keys := scope.Keys(chain)
	f.key, f.b = keys[len(keys)-1], c.start()
	idx, e, err := c.s.cache.Longest(ctx, keys)
	switch {
	case err == nil && idx == len(keys)-1 && c.usable(e):
		f.hit = e
	case err == nil && idx == len(keys)-1:
		f.stale = e
	case err == nil && c.anchorable(e):
		f.b = c.on(prefixAt(grid, lo, idx), e) // build on the longest cached earlier prefix
	case errors.Is(err, cache.ErrNotFound):
	default:
		return f, err
	}
	return f, nil
}

// flightKey is the key of the computation of this compaction's summary under key in this
// process (flights): compactions share one only when they keep the same requests and have
// the same summary room (servesKey).
func (c *compaction) flightKey(key cache.Key) string { return key.String() + "/" + c.servesKey() }

// start is where a summary with no cached prefix starts: after the conversation's latest
// summary, on top of its text, whose citations of its own source are qualified by that
// source's hash (its marker's) so that they keep naming the messages they named.
func (c *compaction) start() base {
	if si := c.plan.GetSummaryIndex(); si >= 0 {
		anchor := engine.SummaryText(c.msgs[si])
		if hash, _, ok := engine.ParseSourceMarker(messageText(c.msgs[si])); ok {
			anchor = engine.QualifyCitations(anchor, hash)
		}
		return base{from: int(si) + 1, anchor: anchor}
	}
	return base{}
}

// on is the base of a summary built on e, the cached summary of msgs[0:from]: the requests
// e left out because they stayed verbatim beside it, and which this compaction does not
// keep, go into the new summary.
func (c *compaction) on(from int, e *cache.Entry) base {
	b := base{from: from, anchor: e.Text}
	for _, k := range e.Kept {
		if _, ok := slices.BinarySearch(c.kept, k); !ok && int(k) < from {
			b.released = append(b.released, k)
		}
	}
	return b
}

// usable reports whether e, a cached summary of msgs[0:cut], serves this compaction as it
// is: it fits the summary room, holds every request this compaction does not keep, and keeps
// what this compaction's own would (adequate).
func (c *compaction) usable(e *cache.Entry) bool {
	return c.holds(e) && c.fits(e.Text) && c.adequate(e)
}

// adequate reports whether e, a cached summary of msgs[0:cut], keeps what a summary written
// for this compaction would: it was written for this summary room or a larger one, or its
// check found everything of its range held (every request and path, nothing cut). A summary
// written for a smaller room that had to leave something out does not stand for this
// compaction, nor is a new one built on it: that would carry its loss on.
func (c *compaction) adequate(e *cache.Entry) bool {
	return e.Room >= c.room || complete(e.Check)
}

// complete reports whether a summary check found everything of its range held: every request
// and path in the summary or appended, nothing cut.
func complete(ch summary.Check) bool {
	return ch.RequestsRetained+ch.RequestsAppended >= ch.RequestsTotal &&
		ch.PathsRetained+ch.PathsAppended >= ch.PathsTotal && !ch.Trimmed
}

// anchorable reports whether a new summary may build on e, a cached summary of an earlier
// prefix: e fits twice the summary room, so no part of it is cut to make it an anchor
// (boundAnchor), and it is adequate (it was not written for a smaller room that made it leave
// something out). A summary written for a much larger room is not built on: cutting it would
// lose what it kept (its requests among them), and a compaction that builds on a cached
// summary must keep what one from the conversation's own start would.
func (c *compaction) anchorable(e *cache.Entry) bool {
	return int64(c.count(e.Text)) <= 2*c.room && c.adequate(e)
}

// rewrite is the base of this compaction's own summary of msgs[0:cut] when e, the cached
// one, does not serve it: built on e, folding in the requests e left out that this
// compaction does not keep; or, when e is longer than the summary room (it was written for a
// larger one) or left out what this compaction's own would keep (adequate: it was written
// for a smaller one), from the conversation's start, as a compaction with nothing cached
// writes it: a summary of a summary for another room would lose what the first kept, or
// keep on what it lost.
func (c *compaction) rewrite(e *cache.Entry) base {
	if !c.fits(e.Text) || !c.adequate(e) {
		return c.start()
	}
	return c.on(c.cut, e)
}

// holds reports whether e, a summary of msgs[0:cut], holds every request this compaction
// does not keep: it left out only requests this compaction keeps verbatim beside it.
func (c *compaction) holds(e *cache.Entry) bool {
	for _, k := range e.Kept {
		if _, ok := slices.BinarySearch(c.kept, k); !ok {
			return false
		}
	}
	return true
}

// fits reports whether a summary text fits the plan's summary room.
func (c *compaction) fits(text string) bool {
	return int64(c.count(text)) <= c.room
}

// servesKey names what decides whether a summary of msgs[0:cut] serves this compaction (see
// usable): the requests it keeps and its summary room. Compactions of one prefix share a
// computation in this process (flights) only when these are the same.
func (c *compaction) servesKey() string {
	var b strings.Builder
	for _, k := range c.kept {
		fmt.Fprintf(&b, "%d,", k)
	}
	fmt.Fprintf(&b, "/%d", c.room)
	return b.String()
}

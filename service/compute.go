package service

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/internal/clip"
	"github.com/compactord/compactord/internal/hold"
	"github.com/compactord/compactord/summarize"
)

// The computation of a summary, detached from the call that started it and shared by the calls
// that wait for it (flight.go), and the fallback summarizer that stands in for a failed one.

// detach runs compute for fl in a goroutine of its own, which keeps what the call of ctx
// holds until it ends and runs to ctx's deadline whether or not the caller waits for it.
func (c *compaction) detach(ctx context.Context, fl *flight, compute func(context.Context) (*cache.Entry, cache.Status, error)) {
	detached := hold.Detach(ctx)
	fctx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if dl, ok := ctx.Deadline(); ok {
		fctx, cancel = context.WithDeadline(fctx, dl)
	}
	go func() {
		defer detached()
		defer cancel()
		e, st, err := compute(fctx)
		c.s.flights.finish(fl, e, st, err)
	}()
}

// compute is the computation of this compaction's summary: with stale (this prefix's cached
// summary, which does not serve it), its own (ownRoom); else cache.Fill of key with a summary
// built on b, unless another compaction's summary of this prefix was stored while this one
// waited on its lock and does not serve this one: then its own too. A panic (a bug) is an
// error: no caller is left to recover it.
func (c *compaction) compute(ctx context.Context, key cache.Key, b base, stale *cache.Entry) (e *cache.Entry, st cache.Status, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.s.logger.ErrorContext(ctx, "panic while summarizing", "panic", p, "stack", string(debug.Stack()))
			err = errors.New("compact: internal error while summarizing")
		}
	}()
	if stale == nil {
		e, st, err = cache.Fill(ctx, c.s.cache, key, c.s.fill, func(ctx context.Context) (*cache.Entry, error) {
			return c.summarize(ctx, b)
		})
		if err != nil || st != cache.StatusHit || c.usable(e) {
			return e, st, err
		}
		stale = e
	}
	return c.ownRoom(ctx, key, stale)
}

// ownRoom returns this compaction's own summary of msgs[0:cut] when stale, the one cached
// under key, does not serve it: the summary cached for its summary room and the requests it
// keeps (key's variant for servesKey), or one rewritten from stale (rewrite) and stored there,
// so that the next compaction like this one finds it rather than writing it again; the
// summary under key stays for the compactions it serves.
func (c *compaction) ownRoom(ctx context.Context, key cache.Key, stale *cache.Entry) (*cache.Entry, cache.Status, error) {
	own := key.Variant(c.servesKey())
	if e, err := c.s.cache.Get(ctx, own); err == nil && c.usable(e) {
		return e, cache.StatusHit, nil
	}
	return cache.Fill(ctx, c.s.cache, own, c.s.fill, func(ctx context.Context) (*cache.Entry, error) {
		return c.summarize(ctx, c.rewrite(stale))
	})
}

// transient reports whether err is a summarizer failure a fallback summarizer may stand in
// for: not the caller's deadline or cancellation, not bad input.
func transient(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, summarize.ErrUnavailable) || errors.Is(err, summarize.ErrEmptySummary))
}

// fallback has fb write the summary the compaction's summarizer failed to write. It is not
// cached: the next call tries that summarizer again.
func (c compaction) fallback(ctx context.Context, fb summarize.Summarizer) (*cache.Entry, error) {
	c.sum, c.bypass = fb, true
	return c.summarize(ctx, c.start())
}

// fallbackWarning is the response's warning that fb wrote the summary because the summarizer
// named from failed with err (whose text names the failure and, for a chunked summary, the
// chunk; never the provider's response body).
func fallbackWarning(from string, fb summarize.Summarizer, err error) string {
	return fmt.Sprintf("summary: %s failed (%s); the fallback %s wrote this summary, which is not cached",
		from, clip.String(strings.TrimPrefix(err.Error(), "compact: "), 2*clip.Max), fb.Fingerprint().Name)
}

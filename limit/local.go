package limit

import (
	"time"

	"golang.org/x/time/rate"
)

// The state of the limits a replica enforces alone while Redis fails (rate limiters and
// token windows per tenant). Without authentication a caller names any tenant, so it is
// bounded, and bounded so that naming many tenants cannot reset anyone's limits: when a map
// is full, the entries at rest (a limiter as full as a new one, a token window that has
// ended: forgetting them changes no decision) make room; failing that, a tenant not yet
// remembered shares an overflow entry with every other newcomer of the same quota (stricter
// for them, never looser for anyone). There is one overflow entry per quota, never one
// replaced by the next tenant of another quota (which would reset the limit of every
// newcomer sharing it, issue 33): a rate limiter per rate and burst, a token window per
// window length. The configuration has finitely many quotas, so that is bounded too.

// maxLocalTenants bounds the tenants each local map remembers by name.
const maxLocalTenants = 10000

// sweepInterval bounds how often a full map is searched for entries at rest.
const sweepInterval = 100 * time.Millisecond

// localMap is one bounded map of local state, V per tenant, with the overflow entries of
// the tenants it cannot take keyed by their quota, Q.
type localMap[Q comparable, V any] struct {
	m        map[string]V
	overflow map[Q]V
	swept    time.Time
}

func newLocalMap[Q comparable, V any]() localMap[Q, V] {
	return localMap[Q, V]{m: map[string]V{}, overflow: map[Q]V{}}
}

// load returns tenant's state (the zero V when there is none yet) and whether it lives under
// tenant's name (own) or, m being full of entries not at rest, under the overflow entry of
// its quota q; store puts it back there.
func (lm *localMap[Q, V]) load(tenant string, q Q, now time.Time, atRest func(V) bool) (v V, own bool) {
	if lm.room(tenant, now, atRest) {
		return lm.m[tenant], true
	}
	return lm.overflow[q], false
}

func (lm *localMap[Q, V]) store(tenant string, q Q, own bool, v V) {
	if own {
		lm.m[tenant] = v
	} else {
		lm.overflow[q] = v
	}
}

// room reports whether tenant has, or can have, an entry of its own.
func (lm *localMap[Q, V]) room(tenant string, now time.Time, atRest func(V) bool) bool {
	if _, ok := lm.m[tenant]; ok || len(lm.m) < maxLocalTenants {
		return true
	}
	if now.Sub(lm.swept) >= sweepInterval {
		lm.swept = now
		for k, v := range lm.m {
			if atRest(v) {
				delete(lm.m, k)
			}
		}
	}
	return len(lm.m) < maxLocalTenants
}

// rateQuota is what a local rate limiter enforces: one limiter serves one quota.
type rateQuota struct {
	perSecond float64
	burst     int
}

// localRate returns the local limiter of tenant for l. Callers hold e.mu.
func (e *Enforcer) localRate(tenant string, l Quota, now time.Time) *rate.Limiter {
	q := rateQuota{l.CallsPerSecond, l.Burst}
	lim, own := e.rates.load(tenant, q, now, func(lim *rate.Limiter) bool { return lim.TokensAt(now) >= float64(lim.Burst()) })
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(l.CallsPerSecond), l.Burst)
		e.rates.store(tenant, q, own, lim)
	}
	return lim
}

// tokenWindow is a tenant's local count of summarizer tokens in the window index, which
// ends at until.
type tokenWindow struct {
	index, used int64
	until       time.Time
}

// addLocalTokens adds n to tenant's local count in window idx of l (ending at until) and
// returns the count before. Callers hold e.mu.
func (e *Enforcer) addLocalTokens(tenant string, l Quota, idx int64, until time.Time, n int64) (before int64) {
	now := e.now()
	w, own := e.tokens.load(tenant, l.TokenWindow, now, func(w tokenWindow) bool { return !now.Before(w.until) })
	if w.index != idx {
		w = tokenWindow{index: idx, until: until}
	}
	before = w.used
	w.used = max(0, w.used+n)
	e.tokens.store(tenant, l.TokenWindow, own, w)
	return before
}

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
// remembered shares one overflow entry with every other newcomer (stricter for them, never
// looser for anyone).

// maxLocalTenants bounds the entries of each local map, the overflow entry included.
const maxLocalTenants = 10000

// overflowTenant keys the shared entry of the tenants a full map cannot take. It is no
// tenant's name: tenant names are printable (auth.ValidTenant).
const overflowTenant = "\x00overflow"

// sweepInterval bounds how often a full map is searched for entries at rest.
const sweepInterval = 100 * time.Millisecond

// localMap is one bounded map of local state.
type localMap[V any] struct {
	m     map[string]V
	swept time.Time
}

func newLocalMap[V any]() localMap[V] { return localMap[V]{m: map[string]V{}} }

// key returns where tenant's state lives in m: under tenant, or under overflowTenant when m
// is full of entries not at rest.
func (lm *localMap[V]) key(tenant string, now time.Time, atRest func(V) bool) string {
	if _, ok := lm.m[tenant]; ok || len(lm.m) < maxLocalTenants-1 {
		return tenant
	}
	if now.Sub(lm.swept) >= sweepInterval {
		lm.swept = now
		for k, v := range lm.m {
			if k != overflowTenant && atRest(v) {
				delete(lm.m, k)
			}
		}
	}
	if len(lm.m) < maxLocalTenants-1 {
		return tenant
	}
	return overflowTenant
}

// localRate returns the local limiter of tenant for l. Callers hold e.mu.
func (e *Enforcer) localRate(tenant string, l Quota, now time.Time) *rate.Limiter {
	k := e.rates.key(tenant, now, func(lim *rate.Limiter) bool { return lim.TokensAt(now) >= float64(lim.Burst()) })
	lim := e.rates.m[k]
	if lim == nil || lim.Limit() != rate.Limit(l.CallsPerSecond) || lim.Burst() != l.Burst {
		lim = rate.NewLimiter(rate.Limit(l.CallsPerSecond), l.Burst)
		e.rates.m[k] = lim
	}
	return lim
}

// tokenWindow is a tenant's local count of summarizer tokens in the window index, which
// ends at until.
type tokenWindow struct {
	index, used int64
	until       time.Time
}

// addLocalTokens adds n to tenant's local count in window idx (ending at until) and returns
// the count before. Callers hold e.mu.
func (e *Enforcer) addLocalTokens(tenant string, idx int64, until time.Time, n int64) (before int64) {
	now := e.now()
	k := e.tokens.key(tenant, now, func(w tokenWindow) bool { return !now.Before(w.until) })
	w := e.tokens.m[k]
	if w.index != idx {
		w = tokenWindow{index: idx, until: until}
	}
	before = w.used
	w.used = max(0, w.used+n)
	e.tokens.m[k] = w
	return before
}

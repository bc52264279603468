// Package limit holds compactord's admission control: per-tenant limits enforced across
// replicas through Redis (calls per second, concurrent Compacts, summarizer tokens per
// window), with a local fallback while Redis is down, and a server-wide bound on in-flight
// work beyond which calls are refused at once instead of queued.
//
// The call rate is go-redis/redis_rate's GCRA (one Lua script per decision); the local
// fallback is golang.org/x/time/rate. Concurrency leases and token windows are small Redis
// scripts of our own: no maintained library keeps a distributed semaphore with leases over
// go-redis, and a token budget is an INCRBY with an expiry.
//
// A tenant's concurrency leases are one sorted set, each lease a member scored by its own
// expiry, rather than one key per lease: admission must count the live leases and add one
// in a single atomic step, which one script on one key does in one round trip, in one
// Cluster slot (the key's hash tag), where counting keys per lease would need a SCAN. Each
// lease expires by its score (a call's deadline plus a second, at most 10 minutes); the
// set's own expiry, which only bounds its life once every replica holding a lease is gone,
// is that of its latest lease, so that a short lease never takes longer ones with it.
package limit

import (
	"errors"
	"fmt"
	"time"
)

// Quota is one tenant's limits (what a QuotaFailure names when one is exceeded). Zero takes
// the default's value; a negative value means unlimited.
type Quota struct {
	// CallsPerSecond bounds CompactorService calls; Burst is how many may come at once
	// (default: the rate, at least 1).
	CallsPerSecond float64 `yaml:"calls_per_second"`
	Burst          int     `yaml:"burst"`
	// ConcurrentCompacts bounds the tenant's Compact calls in flight across replicas.
	ConcurrentCompacts int `yaml:"concurrent_compacts"`
	// SummarizerTokens bounds the tokens (input + output) LLM summarizers spend for the
	// tenant per TokenWindow (default 1h). The extractive summarizer spends none.
	SummarizerTokens int64         `yaml:"summarizer_tokens"`
	TokenWindow      time.Duration `yaml:"token_window"`
}

// Config is the limits section of the --config file.
type Config struct {
	// Default applies to every tenant; Tenants override it field by field.
	Default Quota            `yaml:"default"`
	Tenants map[string]Quota `yaml:"tenants"`
}

// Names of the limits, as QuotaFailure details, errors and metrics name them.
const (
	CallsPerSecond     = "calls_per_second"
	ConcurrentCompacts = "concurrent_compacts"
	SummarizerTokens   = "summarizer_tokens"
)

// Validate reports values that cannot work.
func (c Config) Validate() error {
	var errs []error
	check := func(who string, l Quota) {
		if l.Burst < 0 {
			errs = append(errs, fmt.Errorf("%s.burst: must not be negative", who))
		}
		if l.TokenWindow < 0 {
			errs = append(errs, fmt.Errorf("%s.token_window: must not be negative", who))
		}
	}
	check("default", c.Default)
	for t, l := range c.Tenants {
		if t == "" {
			errs = append(errs, errors.New("tenants: a tenant needs a name"))
		}
		check("tenants."+t, l)
	}
	return errors.Join(errs...)
}

// Enabled reports whether any limit is set.
func (c Config) Enabled() bool {
	if c.Default != (Quota{}) {
		return true
	}
	for _, l := range c.Tenants {
		if l != (Quota{}) {
			return true
		}
	}
	return false
}

// For returns the limits of tenant: its own over the default.
func (c Config) For(tenant string) Quota {
	l, d := c.Tenants[tenant], c.Default
	if l.CallsPerSecond == 0 {
		l.CallsPerSecond = d.CallsPerSecond
	}
	if l.Burst == 0 {
		l.Burst = d.Burst
	}
	if l.ConcurrentCompacts == 0 {
		l.ConcurrentCompacts = d.ConcurrentCompacts
	}
	if l.SummarizerTokens == 0 {
		l.SummarizerTokens = d.SummarizerTokens
	}
	if l.TokenWindow == 0 {
		l.TokenWindow = d.TokenWindow
	}
	if l.TokenWindow == 0 {
		l.TokenWindow = time.Hour
	}
	if l.Burst == 0 {
		l.Burst = max(1, int(l.CallsPerSecond))
	}
	return l
}

// TenantNames are the tenants the configuration names, for bounded metric labels.
func (c Config) TenantNames() []string {
	out := make([]string, 0, len(c.Tenants))
	for t := range c.Tenants {
		out = append(out, t)
	}
	return out
}

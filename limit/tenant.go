package limit

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/compactord/compactord/auth"
	"github.com/compactord/compactord/internal/hold"
	"github.com/compactord/compactord/internal/lostwrite"
	"github.com/compactord/compactord/metrics"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
)

// DefaultRedisTimeout bounds each Redis decision; past it the replica decides alone.
const DefaultRedisTimeout = 50 * time.Millisecond

// Options configure an Enforcer.
type Options struct {
	// Redis holds the shared counters; nil enforces every limit per replica.
	Redis redis.UniversalClient
	// Timeout bounds each Redis decision; zero means DefaultRedisTimeout.
	Timeout time.Duration
	// Metrics counts refusals and local fallbacks; nil records nothing.
	Metrics *metrics.Recorder
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Enforcer enforces the per-tenant limits of a Config. While Redis fails, each replica
// enforces the limits alone (so a tenant may get up to replicas × its limits); every such
// decision is counted in compactord_limit_fallback_total.
type Enforcer struct {
	cfg     Config
	rdb     redis.UniversalClient
	gcra    *redis_rate.Limiter
	timeout time.Duration
	metrics *metrics.Recorder
	now     func() time.Time
	seq     atomic.Uint64
	id      string // this process, in lease members

	// The local fallback (local.go); running holds only Compacts in flight.
	mu      sync.Mutex
	rates   localMap[rateQuota, *rate.Limiter]
	running map[string]int
	tokens  localMap[time.Duration, tokenWindow] // overflow by window length
}

// New returns an Enforcer of cfg.
func New(cfg Config, o Options) *Enforcer {
	e := &Enforcer{cfg: cfg, rdb: o.Redis, timeout: o.Timeout, metrics: o.Metrics, now: o.Now,
		rates: newLocalMap[rateQuota, *rate.Limiter](), running: map[string]int{}, tokens: newLocalMap[time.Duration, tokenWindow]()}
	if e.timeout <= 0 {
		e.timeout = DefaultRedisTimeout
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.rdb != nil {
		e.gcra = redis_rate.NewLimiter(e.rdb)
	}
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	e.id = hex.EncodeToString(b[:])
	o.Metrics.SetTenantLabels(cfg.TenantNames()...)
	return e
}

// key is the Redis key of a tenant's counter; the hash tag keeps a tenant's keys in one
// Cluster slot, and hashing keeps any tenant name a valid, bounded key.
func key(tenant, what string) string {
	sum := sha256.Sum256([]byte(tenant))
	return "compactord:limit:{" + hex.EncodeToString(sum[:8]) + "}:" + what
}

// UnaryServerInterceptor enforces calls_per_second on every CompactorService call and
// concurrent_compacts on Compact, for the tenant the call acts for (auth.Tenant). A
// Compact's lease is held until the call, and the work it detached, end.
func (e *Enforcer) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !strings.HasPrefix(info.FullMethod, servicePrefix) {
			return h(ctx, req)
		}
		tenant := auth.Tenant(ctx)
		l := e.cfg.For(tenant)
		if err := e.allowCall(ctx, tenant, l); err != nil {
			return nil, err
		}
		if info.FullMethod == servicePrefix+"Compact" && l.ConcurrentCompacts > 0 {
			held, err := e.acquire(ctx, tenant, l)
			if err != nil {
				return nil, err
			}
			// The lease lasts as long as the call and the summarization it may leave
			// running when its caller goes (package hold), extended for a preparation
			// that outlives the caller's deadline.
			if !hold.AddLease(ctx, held.release, held.extend) {
				defer held.release()
			}
		}
		return h(ctx, req)
	}
}

// allowCall applies calls_per_second.
func (e *Enforcer) allowCall(ctx context.Context, tenant string, l Quota) error {
	if l.CallsPerSecond <= 0 {
		return nil
	}
	if e.gcra != nil {
		rctx, cancel := context.WithTimeout(ctx, e.timeout)
		res, err := e.gcra.Allow(rctx, key(tenant, "calls"), gcraLimit(l))
		cancel()
		if err == nil {
			if res.Allowed > 0 {
				return nil
			}
			return e.refuse(CallsPerSecond, tenant, res.RetryAfter, fmt.Sprintf("%g calls per second (burst %d)", l.CallsPerSecond, l.Burst))
		}
		e.metrics.LimitFallback(CallsPerSecond)
	}
	e.mu.Lock()
	lim := e.localRate(tenant, l, e.now())
	e.mu.Unlock()
	r := lim.ReserveN(e.now(), 1)
	if d := r.DelayFrom(e.now()); d > 0 {
		r.CancelAt(e.now())
		return e.refuse(CallsPerSecond, tenant, d, fmt.Sprintf("%g calls per second (burst %d)", l.CallsPerSecond, l.Burst))
	}
	return nil
}

// gcraLimit is l's rate as redis_rate counts it: one call per emission interval of
// 1/calls_per_second, exactly (to the nanosecond) the rate of the local fallback's
// golang.org/x/time/rate limiter, with the same burst.
func gcraLimit(l Quota) redis_rate.Limit {
	return redis_rate.Limit{Rate: 1, Burst: l.Burst, Period: time.Duration(math.Round(float64(time.Second) / l.CallsPerSecond))}
}

// leaseTTL bounds a concurrency lease whose replica died before releasing it.
const leaseTTL = 10 * time.Minute

// acquireScript takes a lease in a sorted set of leases scored by their expiry (ms, Redis
// time), after dropping expired ones: 1 when taken, 0 when the tenant is at its limit. The
// set expires with its latest lease (the highest score), never with the one just taken: a
// short lease must not take the longer ones with it (issue 33).
var acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return 1`)

// lease is a concurrent_compacts slot: release gives it back; extend makes it last at least
// d from now (a no-op for a slot this replica counts alone, which has no expiry).
type lease struct {
	release func()
	extend  func(d time.Duration)
}

// extendScript makes lease ARGV[2] of the lease set last at least ARGV[1] ms from now, and the
// set as long as its latest lease: 0 when the lease is gone (expired or given back).
var extendScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not score or tonumber(score) <= now then return 0 end
redis.call('ZADD', KEYS[1], 'GT', now + tonumber(ARGV[1]), ARGV[2])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return 1`)

// acquire applies concurrent_compacts: a lease held until released, on Redis until the
// call's deadline (plus a second) at the latest, or leaseTTL, unless extended.
func (e *Enforcer) acquire(ctx context.Context, tenant string, l Quota) (lease, error) {
	desc := fmt.Sprintf("%d Compact calls in flight", l.ConcurrentCompacts)
	if e.rdb != nil {
		k := key(tenant, "compacts")
		member := e.id + "-" + strconv.FormatUint(e.seq.Add(1), 10)
		ttl := leaseTTL
		if dl, ok := ctx.Deadline(); ok {
			ttl = min(ttl, time.Until(dl)+time.Second)
		}
		rctx, cancel := context.WithTimeout(ctx, e.timeout)
		got, err := acquireScript.Run(rctx, e.rdb, []string{k}, l.ConcurrentCompacts, ttl.Milliseconds(), member).Int()
		cancel()
		switch {
		case err == nil && got == 1:
			return lease{
				release: sync.OnceFunc(func() {
					rctx, cancel := context.WithTimeout(context.Background(), e.timeout)
					defer cancel()
					if e.rdb.ZRem(rctx, k, member).Err() != nil {
						e.undoLease(k, member) // try again, detached, rather than wait for the lease's expiry
					}
				}),
				extend: func(d time.Duration) {
					// A failed extension leaves the lease to its own expiry: the limit
					// holds for less long, never longer than it should.
					rctx, cancel := context.WithTimeout(context.Background(), e.timeout)
					defer cancel()
					_ = extendScript.Run(rctx, e.rdb, []string{k}, (min(d, leaseTTL) + time.Second).Milliseconds(), member).Err()
				},
			}, nil
		case err == nil:
			return lease{}, e.refuse(ConcurrentCompacts, tenant, time.Second, desc)
		}
		// Redis may have added the lease after the timeout: take it back, or the tenant
		// would have one slot fewer until it expires.
		e.undoLease(k, member)
		e.metrics.LimitFallback(ConcurrentCompacts)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running[tenant] >= l.ConcurrentCompacts {
		return lease{}, e.refuse(ConcurrentCompacts, tenant, time.Second, desc)
	}
	e.running[tenant]++
	return lease{
		release: sync.OnceFunc(func() {
			e.mu.Lock()
			if e.running[tenant]--; e.running[tenant] == 0 {
				delete(e.running, tenant)
			}
			e.mu.Unlock()
		}),
		extend: func(time.Duration) {},
	}, nil
}

// undoLease removes member from the lease set k in the background: a lease whose write or
// release lost its reply (lostwrite).
func (e *Enforcer) undoLease(k, member string) {
	lostwrite.Undo(func(ctx context.Context) (bool, error) {
		n, err := e.rdb.ZRem(ctx, k, member).Result()
		return n > 0, err
	})
}

// reserveScript reserves ARGV[2] tokens in a tenant's token window unless it has spent
// its ARGV[1] already: {1, used before} when reserved, {0, used} when refused.
var reserveScript = redis.NewScript(`
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used >= tonumber(ARGV[1]) then return {0, used} end
redis.call('INCRBY', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, used}`)

// ReserveTokens applies summarizer_tokens before an LLM summarizer call for tenant: it
// refuses once the tenant has spent its tokens for the current window, and otherwise
// reserves estimate tokens (what the call may spend), so that calls in flight count against
// the budget before they report. settle charges what the call spent in place of the
// estimate; it must run once, failure or not.
//
// A reservation whose reply Redis lost may stay counted until the window ends: stricter,
// by one estimate, never looser.
func (e *Enforcer) ReserveTokens(ctx context.Context, tenant string, estimate int64) (settle func(spent int64), err error) {
	l := e.cfg.For(tenant)
	if l.SummarizerTokens <= 0 {
		return func(int64) {}, nil
	}
	estimate = max(estimate, 0)
	idx, left := e.window(l)
	until := e.now().Add(left)
	refuse := func(used int64) error {
		return e.refuse(SummarizerTokens, tenant, left, fmt.Sprintf("%d of %d summarizer tokens spent in this %s window", used, l.SummarizerTokens, l.TokenWindow))
	}
	k := tokensKey(tenant, idx)
	inRedis := false
	if e.rdb != nil {
		rctx, cancel := context.WithTimeout(ctx, e.timeout)
		res, err := reserveScript.Run(rctx, e.rdb, []string{k}, l.SummarizerTokens, estimate, (2 * l.TokenWindow).Milliseconds()).Int64Slice()
		cancel()
		switch {
		case err == nil && len(res) == 2 && res[0] == 0:
			return nil, refuse(res[1])
		case err == nil && len(res) == 2:
			inRedis = true
		default:
			e.metrics.LimitFallback(SummarizerTokens)
		}
	}
	e.mu.Lock()
	used := e.addLocalTokens(tenant, l, idx, until, estimate)
	if !inRedis && used >= l.SummarizerTokens {
		e.addLocalTokens(tenant, l, idx, until, -estimate)
		e.mu.Unlock()
		return nil, refuse(used)
	}
	e.mu.Unlock()
	return onceSettle(func(spent int64) {
		// Redis has the estimate when it took the reservation, nothing otherwise.
		redisDelta := max(spent, 0)
		if inRedis {
			redisDelta -= estimate
		}
		e.mu.Lock()
		e.addLocalTokens(tenant, l, idx, until, max(spent, 0)-estimate)
		e.mu.Unlock()
		e.chargeRedis(ctx, k, redisDelta, l)
	}), nil
}

// onceSettle makes settle run at most once.
func onceSettle(settle func(int64)) func(int64) {
	var once sync.Once
	return func(spent int64) { once.Do(func() { settle(spent) }) }
}

// chargeRedis adds delta (negative: gives back) to the token count under k.
func (e *Enforcer) chargeRedis(ctx context.Context, k string, delta int64, l Quota) {
	if e.rdb == nil || delta == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.timeout)
	defer cancel()
	_, err := e.rdb.TxPipelined(rctx, func(p redis.Pipeliner) error {
		p.IncrBy(rctx, k, delta)
		p.PExpire(rctx, k, 2*l.TokenWindow)
		return nil
	})
	if err != nil {
		e.metrics.LimitFallback(SummarizerTokens)
	}
}

// window returns the index of the current token window and the time left in it.
func (e *Enforcer) window(l Quota) (int64, time.Duration) {
	now := e.now().UnixNano()
	w := l.TokenWindow.Nanoseconds()
	return now / w, time.Duration(w - now%w)
}

func tokensKey(tenant string, idx int64) string {
	return key(tenant, "tokens:"+strconv.FormatInt(idx, 10))
}

func (e *Enforcer) refuse(limit, tenant string, retry time.Duration, desc string) error {
	e.metrics.LimitRefused(limit, tenant)
	return refusal(limit, tenant, retry, desc)
}

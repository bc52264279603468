package cache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/compactord/compactord/internal/lostwrite"
	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// DefaultKeyPrefix prefixes every Redis key the cache writes.
const DefaultKeyPrefix = "compactord:v1:"

// RedisOptions configure NewRedis.
type RedisOptions struct {
	// URL is a redis:// or rediss:// (TLS) URL: user, password and database come from it, and
	// go-redis query parameters (dial_timeout, read_timeout, pool_size, max_retries, …) are
	// honoured. Without dial_timeout / read_timeout / write_timeout in the URL they default to
	// 2s / 1s / 1s, and a failed dial is retried once, so that a dead Redis degrades Compact
	// quickly instead of stalling it.
	URL string
	// TTL expires entries this long after they were stored. Default 7 days; negative keeps
	// them until Redis evicts them.
	TTL time.Duration
	// KeyPrefix namespaces every key (entries and locks). Default DefaultKeyPrefix.
	KeyPrefix string
	// Configure, when set, adjusts the client options parsed from URL (e.g. TLS roots).
	Configure func(*redis.Options)
	// TracerProvider receives the cache spans; default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Budget bounds every Redis command: past it the command gives up and the call goes on
	// without the cache (a stalled Redis costs a call at most this). Default
	// DefaultRedisBudget.
	Budget time.Duration
	// Breaker opens after this many consecutive failed commands: while open, commands fail
	// at once for BreakerCooldown, then one probe decides. Default 5 and 1s; Breaker < 0
	// disables it.
	Breaker         int
	BreakerCooldown time.Duration
	// OnBreaker, when set, is told of every change of the breaker's state ("closed", "open",
	// "half-open").
	OnBreaker func(from, to string)
}

// DefaultRedisBudget is RedisOptions.Budget's default: a cache round trip on a healthy
// network takes well under a millisecond; a Compact that has to give up on Redis should lose
// little more than that.
const DefaultRedisBudget = 50 * time.Millisecond

// Redis is a Cache shared by replicas: entries are JSON values with their metadata under
// KeyPrefix + Key, locks are SET NX PX keys released by a compare-and-delete script.
type Redis struct {
	rdb    redis.UniversalClient
	ttl    time.Duration
	prefix string
	tr     tracer
	notes  *notifications
	budget time.Duration
	cb     *gobreaker.CircuitBreaker[struct{}] // nil: no breaker
}

var _ Cache = (*Redis)(nil)

// NewRedis connects lazily to the Redis at opt.URL (no network I/O happens here). It fails
// only for a malformed URL.
func NewRedis(opt RedisOptions) (*Redis, error) {
	o, err := redis.ParseURL(opt.URL)
	if err != nil {
		return nil, fmt.Errorf("cache: redis url: %w", err)
	}
	if !strings.Contains(opt.URL, "dial_timeout=") {
		o.DialTimeout = 2 * time.Second
	}
	if !strings.Contains(opt.URL, "read_timeout=") {
		o.ReadTimeout = time.Second
	}
	if !strings.Contains(opt.URL, "write_timeout=") {
		o.WriteTimeout = time.Second
	}
	// go-redis dials up to 5 times 100ms apart by default; a dead Redis should cost a
	// request one quick retry, not half a second per command.
	o.DialerRetries = 2
	o.DialerRetryTimeout = 50 * time.Millisecond
	// The budget is a context deadline; without this a stalled socket waits ReadTimeout.
	o.ContextTimeoutEnabled = true
	if opt.Configure != nil {
		opt.Configure(o)
	}
	return NewRedisClient(redis.NewClient(o), opt), nil
}

// NewRedisClient wraps an existing client (single node, cluster or sentinel); opt.URL and
// opt.Configure are ignored. Close closes the client.
func NewRedisClient(rdb redis.UniversalClient, opt RedisOptions) *Redis {
	if opt.TTL == 0 {
		opt.TTL = 7 * 24 * time.Hour
	}
	if opt.KeyPrefix == "" {
		opt.KeyPrefix = DefaultKeyPrefix
	}
	if opt.Budget <= 0 {
		opt.Budget = DefaultRedisBudget
	}
	r := &Redis{
		rdb:    rdb,
		ttl:    opt.TTL,
		prefix: opt.KeyPrefix,
		notes:  newNotifications(rdb, opt.KeyPrefix),
		tr: newTracer(opt.TracerProvider, AttrBackend.String("redis"),
			attribute.String("db.system.name", "redis")),
		budget: opt.Budget,
	}
	if opt.Breaker >= 0 {
		r.cb = newBreaker(opt)
	}
	return r
}

// newBreaker is the circuit breaker around Redis (sony/gobreaker): consecutive failures
// open it; answers such as "not found" and "locked" are successes, and so is a command the
// caller itself abandoned.
func newBreaker(opt RedisOptions) *gobreaker.CircuitBreaker[struct{}] {
	failures := opt.Breaker
	if failures == 0 {
		failures = 5
	}
	cooldown := opt.BreakerCooldown
	if cooldown <= 0 {
		cooldown = time.Second
	}
	return gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "redis",
		MaxRequests: 1,
		Timeout:     cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(failures) },
		IsSuccessful: func(err error) bool {
			return err == nil || errors.Is(err, redis.Nil) || errors.Is(err, errCallerGone)
		},
		OnStateChange: func(_ string, from, to gobreaker.State) {
			if opt.OnBreaker != nil {
				opt.OnBreaker(from.String(), to.String())
			}
		},
	})
}

// errCallerGone marks a command abandoned because the caller's context ended: not a Redis
// failure.
var errCallerGone = errors.New("caller gone")

// guard runs one Redis command within the budget and behind the breaker. fn's error is
// returned as it is (redis.Nil included); an open breaker returns an error wrapping
// ErrUnavailable at once.
func (r *Redis) guard(ctx context.Context, fn func(ctx context.Context) error) error {
	run := func() error {
		bctx, cancel := context.WithTimeout(ctx, r.budget)
		defer cancel()
		err := fn(bctx)
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("%w: %w", errCallerGone, err)
		}
		return err
	}
	if r.cb == nil {
		return run()
	}
	_, err := r.cb.Execute(func() (struct{}, error) { return struct{}{}, run() })
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return errBreakerOpen
	}
	return err
}

// errBreakerOpen is guard's answer while the breaker is open: the command was not sent.
var errBreakerOpen = fmt.Errorf("%w: circuit breaker open", ErrUnavailable)

// Client returns the Redis client, for other users of the same Redis (per-tenant limits).
func (r *Redis) Client() redis.UniversalClient { return r.rdb }

// Close ends the notification subscription and releases the client's connections.
func (r *Redis) Close() error {
	r.notes.close()
	return r.rdb.Close()
}

// changed implements notifier for Fill: waiters on any replica wake when key is stored or
// its lock released (notify.go).
func (r *Redis) changed(key Key) <-chan struct{} { return r.notes.changed(key) }

// entryKey and lockKey put the scope (tenant and fingerprint hashes) in a hash tag, so every
// key of one scope lives in one Redis Cluster slot and Longest's MGET works on a cluster.
func (r *Redis) entryKey(k Key) string { return r.prefix + "s:" + tagged(k) }
func (r *Redis) lockKey(k Key) string  { return r.prefix + "l:" + tagged(k) }

func tagged(k Key) string {
	i := strings.LastIndexByte(k.s, ':')
	if i < 0 {
		return k.s
	}
	return "{" + k.s[:i] + "}" + k.s[i:]
}

// unavailable wraps a backend failure in ErrUnavailable, unless the caller's context ended:
// then the error wraps only ctx.Err(), since serving without the cache is moot.
func unavailable(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("cache: redis %s: %w", op, cerr)
	}
	return fmt.Errorf("cache: redis %s: %w: %w", op, ErrUnavailable, err)
}

func (r *Redis) start(ctx context.Context, name, op string) (context.Context, trace.Span) {
	return r.tr.t.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(r.tr.attrs...), trace.WithAttributes(attribute.String("db.operation.name", op)))
}

// decode parses a stored value; a value that does not parse counts as absent.
func decode(raw string) (*Entry, bool) {
	var e Entry
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return nil, false
	}
	return &e, true
}

// Get implements Cache.
func (r *Redis) Get(ctx context.Context, key Key) (e *Entry, err error) {
	ctx, span := r.start(ctx, "cache.get", "GET")
	defer func() { span.SetAttributes(AttrHit.Bool(err == nil)); end(span, err) }()
	var raw string
	err = r.guard(ctx, func(ctx context.Context) (err error) {
		raw, err = r.rdb.Get(ctx, r.entryKey(key)).Result()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, unavailable(ctx, "get", err)
	}
	e, ok := decode(raw)
	if !ok {
		return nil, ErrNotFound
	}
	return e, nil
}

// Longest implements Cache with a single MGET.
func (r *Redis) Longest(ctx context.Context, keys []Key) (idx int, e *Entry, err error) {
	ctx, span := r.start(ctx, "cache.longest", "MGET")
	span.SetAttributes(AttrKeys.Int(len(keys)))
	idx = -1
	defer func() {
		span.SetAttributes(AttrHit.Bool(err == nil), AttrHitIndex.Int(idx))
		end(span, err)
	}()
	if len(keys) == 0 {
		return -1, nil, ErrNotFound
	}
	ks := make([]string, len(keys))
	for i, k := range keys {
		ks[i] = r.entryKey(k)
	}
	var vals []any
	err = r.guard(ctx, func(ctx context.Context) (err error) {
		vals, err = r.rdb.MGet(ctx, ks...).Result()
		return err
	})
	if err != nil {
		return -1, nil, unavailable(ctx, "mget", err)
	}
	for i := len(vals) - 1; i >= 0; i-- {
		s, ok := vals[i].(string)
		if !ok {
			continue
		}
		if e, ok := decode(s); ok {
			return i, e, nil
		}
	}
	return -1, nil, ErrNotFound
}

// Set implements Cache.
func (r *Redis) Set(ctx context.Context, key Key, e *Entry) (err error) {
	ctx, span := r.start(ctx, "cache.set", "SET")
	defer func() { end(span, err) }()
	if key.IsZero() || e == nil {
		return fmt.Errorf("cache: set: zero key or nil entry")
	}
	if e.Created.IsZero() {
		c := *e
		c.Created = time.Now().UTC()
		e = &c
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("cache: encode entry: %w", err)
	}
	ttl := r.ttl
	if ttl < 0 {
		ttl = 0 // KEEPTTL is not wanted; 0 means no expiry in go-redis
	}
	if err := r.guard(ctx, func(ctx context.Context) error { return r.rdb.Set(ctx, r.entryKey(key), b, ttl).Err() }); err != nil {
		return unavailable(ctx, "set", err)
	}
	r.publish(ctx, key)
	return nil
}

// Lock implements Cache with SET key token NX PX ttl and a random 128-bit token.
func (r *Redis) Lock(ctx context.Context, key Key, ttl time.Duration) (_ Lease, err error) {
	ctx, span := r.start(ctx, "cache.lock", "SET")
	acquired := false
	defer func() { span.SetAttributes(AttrAcquired.Bool(acquired)); end(span, err) }()
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	token := hex.EncodeToString(b[:])
	lk := r.lockKey(key)
	var res string
	err = r.guard(ctx, func(ctx context.Context) (err error) {
		res, err = r.rdb.SetArgs(ctx, lk, token, redis.SetArgs{Mode: "NX", TTL: lockTTL(ttl)}).Result()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return nil, ErrLocked
	}
	if err != nil {
		if !errors.Is(err, errBreakerOpen) {
			// Redis may have applied the SET after the budget ran out: take it back if it
			// holds our token, or every other caller would wait for it until --lock-ttl.
			r.undoLock(key, lk, token)
		}
		return nil, unavailable(ctx, "lock", err)
	}
	if res != "OK" {
		return nil, ErrLocked
	}
	acquired = true
	return &redisLease{r: r, cacheKey: key, key: lk, token: token}, nil
}

// unlockScript deletes the lock only if it still holds our token.
var unlockScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`)

type redisLease struct {
	r        *Redis
	cacheKey Key
	key      string
	token    string
}

// Unlock implements Lease with a compare-and-delete script.
func (l *redisLease) Unlock(ctx context.Context) (err error) {
	ctx, span := l.r.start(ctx, "cache.unlock", "EVALSHA")
	defer func() { end(span, err) }()
	if err := l.r.guard(ctx, func(ctx context.Context) error {
		return unlockScript.Run(ctx, l.r.rdb, []string{l.key}, l.token).Err()
	}); err != nil && !errors.Is(err, redis.Nil) {
		l.r.undoLock(l.cacheKey, l.key, l.token) // try again, detached, rather than wait for the TTL
		return unavailable(ctx, "unlock", err)
	}
	// Waiters take the lock over when its holder gave up without a result.
	l.r.publish(ctx, l.cacheKey)
	return nil
}

// undoLock deletes the lock lk of key in the background if it holds token: a lock whose SET
// (or release) lost its reply (lostwrite). Waiters are told when it goes.
func (r *Redis) undoLock(key Key, lk, token string) {
	lostwrite.Undo(func(ctx context.Context) (bool, error) {
		n, err := unlockScript.Run(ctx, r.rdb, []string{lk}, token).Int()
		if n == 1 {
			r.publish(ctx, key)
		}
		return n == 1, err
	})
}

// publish tells every replica that key changed (notify.go), within the budget and behind
// the breaker like every other command. It is best effort: waiters fall back to polling.
func (r *Redis) publish(ctx context.Context, key Key) {
	_ = r.guard(ctx, func(ctx context.Context) error { return r.notes.publish(ctx, key) })
}

// LogRedisTo sends the Redis client's own log lines (connection pool and dial failures; never
// cache contents) to l as warnings instead of the standard logger. The client's logger is
// process-wide: call this once, from main.
func LogRedisTo(l *slog.Logger) {
	redis.SetLogger(redisLogger{l})
}

type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}

package cache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisSources is the Sources of replicas sharing a Redis (single node, Sentinel or
// Cluster): a source is one string value, written by one script that also keeps the
// tenant's ledger (the live sources, their sizes and expiries, and their total), so that the
// budget holds across replicas. Every key of a tenant carries its hash as a {hash tag}: they
// live in one Cluster slot, where the script may touch them together. The ledger's keys
// expire with the tenant's newest source, so a tenant's sources and ledger go with its other
// data when the TTL ends or Redis is flushed.
type RedisSources struct {
	r      *Redis
	ttl    time.Duration
	budget int64
}

var _ Sources = (*RedisSources)(nil)

// NewRedisSources keeps sources in r's Redis, under r's key prefix, for ttl (default
// DefaultSourceTTL) within budget bytes per tenant (default DefaultSourceBudget). Its
// commands share r's budget and circuit breaker.
func NewRedisSources(r *Redis, ttl time.Duration, budget int64) *RedisSources {
	if ttl <= 0 {
		ttl = DefaultSourceTTL
	}
	if budget <= 0 {
		budget = DefaultSourceBudget
	}
	return &RedisSources{r: r, ttl: ttl, budget: budget}
}

// keys are the source's key and its tenant's ledger: expiries (sorted set), sizes (hash) and
// the total.
func (s *RedisSources) keys(ref SourceRef) []string {
	tag := s.r.prefix + "src{" + ref.tenant + "}:"
	return []string{tag + ref.hash, tag + "expiry", tag + "size", tag + "used"}
}

// putSourceScript stores ARGV[1] under KEYS[1] for ARGV[2] ms unless the tenant's total
// (KEYS[4]) would pass ARGV[3], after dropping from the ledger the sources whose TTL ended.
// A source already held under the key is replaced, charged the difference. It returns
// {1, total} when stored, {0, total} when refused.
var putSourceScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl, budget, size, member = tonumber(ARGV[2]), tonumber(ARGV[3]), string.len(ARGV[1]), ARGV[4]
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
if #gone > 0 then
  local freed = 0
  for _, v in ipairs(redis.call('HMGET', KEYS[3], unpack(gone))) do freed = freed + (tonumber(v) or 0) end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  redis.call('HDEL', KEYS[3], unpack(gone))
  redis.call('DECRBY', KEYS[4], freed)
end
local old = 0
if redis.call('ZSCORE', KEYS[2], member) then old = tonumber(redis.call('HGET', KEYS[3], member)) or 0 end
local used = tonumber(redis.call('GET', KEYS[4]) or '0') - old
if size > old and used + size > budget then return {0, used + old} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
redis.call('ZADD', KEYS[2], now + ttl, member)
redis.call('HSET', KEYS[3], member, size)
redis.call('SET', KEYS[4], used + size, 'PX', ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('PEXPIRE', KEYS[3], ttl)
return {1, used + size}
`)

// PutSource implements Sources with one script.
func (s *RedisSources) PutSource(ctx context.Context, ref SourceRef, b []byte) (err error) {
	ctx, span := s.r.start(ctx, "source.put", "EVALSHA")
	defer func() { end(span, err) }()
	var res []int64
	err = s.r.guard(ctx, func(ctx context.Context) (err error) {
		res, err = putSourceScript.Run(ctx, s.r.rdb, s.keys(ref), b, s.ttl.Milliseconds(), s.budget, ref.hash).Int64Slice()
		return err
	})
	if err != nil {
		return unavailable(ctx, "put source", err)
	}
	if len(res) != 2 {
		return fmt.Errorf("cache: redis put source: %w: reply %v", ErrUnavailable, res)
	}
	if res[0] == 0 {
		return &BudgetError{Budget: s.budget, Used: res[1], Size: int64(len(b))}
	}
	return nil
}

// GetSource implements Sources with one GET.
func (s *RedisSources) GetSource(ctx context.Context, ref SourceRef) (b []byte, err error) {
	ctx, span := s.r.start(ctx, "source.get", "GET")
	defer func() { span.SetAttributes(AttrHit.Bool(err == nil)); end(span, err) }()
	err = s.r.guard(ctx, func(ctx context.Context) (err error) {
		b, err = s.r.rdb.Get(ctx, s.keys(ref)[0]).Bytes()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, unavailable(ctx, "get source", err)
	}
	return b, nil
}

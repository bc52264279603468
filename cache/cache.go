// Package cache stores compaction summaries under the hash of the conversation prefix they
// cover, so any replica, session or fork that shares a prefix reuses them. Two backends exist:
// an in-memory LRU bounded by bytes (the default, one process) and Redis (shared by replicas).
// Both provide a lock so that N callers compacting the same prefix make one LLM call.
//
// Keys are namespaced per tenant: a Key can only be built from a Scope, which hashes the
// tenant into the key, so one tenant can never read or probe another tenant's entries.
package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/compactord/compactord/summary"
)

// Sentinel errors. Every error a Cache returns wraps one of them.
var (
	// ErrNotFound means no entry is stored under the key (or it expired).
	ErrNotFound = errors.New("cache: not found")
	// ErrUnavailable wraps backend failures (connection refused, timeouts, protocol errors).
	// Callers serve without the cache when they see it.
	ErrUnavailable = errors.New("cache: unavailable")
	// ErrLocked means another holder owns the lock on the key.
	ErrLocked = errors.New("cache: locked by another holder")
)

// Cache is the summary store. Implementations are safe for concurrent use. When ctx ends
// during a call, the error wraps ctx.Err() instead of ErrUnavailable.
type Cache interface {
	// Get returns the entry stored under key, or an error wrapping ErrNotFound. A backend
	// failure is returned as an error wrapping ErrUnavailable.
	Get(ctx context.Context, key Key) (*Entry, error)
	// Longest looks all keys up at once (one round trip for Redis) and returns the highest
	// index whose key has an entry, with that entry. Callers pass the keys of a hash chain in
	// increasing prefix length, so the result is the longest cached prefix. When none has an
	// entry it returns -1 and an error wrapping ErrNotFound; a backend failure returns -1 and
	// an error wrapping ErrUnavailable. An empty keys slice is ErrNotFound.
	Longest(ctx context.Context, keys []Key) (int, *Entry, error)
	// Set stores e under key, replacing any entry, with the cache's TTL; a zero e.Created is
	// stored as the current time. A backend failure is returned as an error wrapping
	// ErrUnavailable.
	Set(ctx context.Context, key Key, e *Entry) error
	// Lock takes the lock on key for at most ttl (below a millisecond: DefaultLockTTL)
	// without waiting. It returns a Lease when the
	// lock was free (or its previous holder's ttl ran out), an error wrapping ErrLocked when
	// another holder owns it, and an error wrapping ErrUnavailable on backend failure. The
	// lock is independent of the entry under key: it only serializes who computes it.
	Lock(ctx context.Context, key Key, ttl time.Duration) (Lease, error)
}

// DefaultLockTTL is the lock ttl used when a caller passes none.
const DefaultLockTTL = 2 * time.Minute

func lockTTL(ttl time.Duration) time.Duration {
	if ttl < time.Millisecond {
		return DefaultLockTTL
	}
	return ttl
}

// Lease is a held lock.
type Lease interface {
	// Unlock releases the lock if this lease still holds it; a lock that expired and was
	// taken by another holder is left alone. Calling Unlock more than once is harmless.
	Unlock(ctx context.Context) error
}

// Entry is one cached summary: what its summarizer wrote and what the summary check found
// (package summary), with what it covers. Its JSON form is what Redis stores: entries written
// by earlier versions decode into it (cache/testdata).
type Entry struct {
	// Output is the summary and what writing it cost.
	summary.Output
	// Summarizer is the configured name of the summarizer that wrote it.
	Summarizer string `json:"summarizer,omitempty"`
	// CoveredMessages is how many messages of the conversation the summary covers.
	CoveredMessages int32 `json:"covered_messages"`
	// Kept are the positions, ascending, of the requests the summary left out because they
	// stayed verbatim beside it. A compaction that keeps fewer must fold those into a new
	// summary (built on this one) rather than serve it as it is.
	Kept []int32 `json:"kept,omitempty"`
	// Room is the summary room, in tokens, the summary was written for (0: not recorded, by an
	// earlier version). A summary written for a smaller room than a compaction's may have left
	// out what that compaction's own would keep.
	Room int64 `json:"room,omitempty"`
	// Created is when the summary was written.
	Created time.Time `json:"created"`
	// Check is what the summary check found when the summary was written: a cached summary
	// is stored checked.
	Check summary.Check `json:"check,omitzero"`
}

// size approximates the memory an entry and its key occupy.
func (e *Entry) size(k Key) int64 {
	const overhead = 160 // struct, map and list bookkeeping
	return int64(len(k.s)+len(e.Text)+len(e.Model)+len(e.PromptVersion)+len(e.Summarizer)+4*len(e.Kept)) + overhead
}

// Scope is everything a summary depends on besides the messages it covers: who asked, which
// summarizer (its fingerprint: name, model, prompt version) and the caller's instructions.
type Scope struct {
	// Tenant identifies the caller; entries of different tenants never share keys. Empty is
	// a tenant of its own (the anonymous one).
	Tenant string
	// Summarizer is the summarizer fingerprint, e.g. summarize.Fingerprint.String().
	Summarizer string
	// Instructions are the per-request summary instructions.
	Instructions string
}

// Key names a cache entry. Build it with Scope.Keys; the zero Key is invalid.
type Key struct{ s string }

// String returns the key as stored (without a backend's prefix). It contains only hashes, no
// conversation text and no tenant name.
func (k Key) String() string { return k.s }

// IsZero reports whether k is the zero Key.
func (k Key) IsZero() bool { return k.s == "" }

// Variant returns the key of another summary of the same prefix in the same scope, one written
// for what tag names (a compaction's summary room and the requests it keeps beside the
// summary): "{key}/{sha256(tag)[:8]}" in hex. It shares the key's scope, so it lives in the
// same Redis Cluster slot; Longest never finds it, so it is found only by asking for it.
func (k Key) Variant(tag string) Key {
	h := sha256.Sum256([]byte(tag))
	return Key{s: k.s + "/" + hex.EncodeToString(h[:8])}
}

// Keys returns the keys of the summaries of the prefixes whose hash chain values are
// prefixHashes (the raw SHA-256 of PlanResponse.prefix_hash), in order: the candidates of one
// Longest lookup, with the scope hashed once. A key is
// "{sha256(tenant)[:16]}:{sha256(summarizer ‖ instructions)[:16]}:{prefix hash}" in hex.
func (s Scope) Keys(prefixHashes [][32]byte) []Key {
	p := s.prefix()
	keys := make([]Key, len(prefixHashes))
	buf := make([]byte, len(p)+hex.EncodedLen(sha256.Size))
	copy(buf, p)
	for i, h := range prefixHashes {
		hex.Encode(buf[len(p):], h[:])
		keys[i] = Key{s: string(buf)}
	}
	return keys
}

// prefix is the scope's part of every key: "{tenant hash}:{fingerprint hash}:".
func (s Scope) prefix() string {
	t := sha256.Sum256([]byte(s.Tenant))
	h := sha256.New()
	// Length-prefix the fields so ("ab","c") and ("a","bc") differ.
	for _, f := range []string{s.Summarizer, s.Instructions} {
		var n [8]byte
		for i, l := 0, uint64(len(f)); i < 8; i++ {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write([]byte(f))
	}
	var fp [sha256.Size]byte
	h.Sum(fp[:0])
	return hex.EncodeToString(t[:8]) + ":" + hex.EncodeToString(fp[:8]) + ":"
}

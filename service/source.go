package service

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/internal/grpcerr"
	"github.com/compactord/compactord/recalltool"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// Keeping a compaction's source: the conversation as Compact received it, encoded once and
// written to the Sources store beside the compaction's own work, so that Expand can return it.

// sourceWrite is one source being written while the compaction goes on.
type sourceWrite struct {
	hash string // hex of the prefix hash of all the request's messages
	done chan struct{}
	err  error
}

// sourceHash is the hash the source of a Compact of msgs (its messages as they arrived) is
// kept under, in hex, or "" when sources are off (no store, or policy.discard_sources). The
// plan names it (engine.Options.Source); keepSource writes the source under it.
func (s *Server) sourceHash(msgs []*compactorv1.Message, p *compactorv1.Policy) string {
	if s.sources == nil || p.GetDiscardSources() {
		return ""
	}
	return engine.HexHash(s.counter.PrefixHash(msgs))
}

// keepSource starts writing msgs, the messages of a Compact as they arrived, for the
// caller's tenant under hash (sourceHash), or returns nil for no hash (sources off). The
// write goes on while the compaction runs; wait for its outcome.
func (s *Server) keepSource(ctx context.Context, msgs []*compactorv1.Message, hash string) *sourceWrite {
	if hash == "" {
		return nil
	}
	w := &sourceWrite{hash: hash, done: make(chan struct{})}
	var h [32]byte
	_, _ = hex.Decode(h[:], []byte(hash)) // sourceHash's hex
	ref := cache.NewSourceRef(tenant(ctx), h)
	if s.keptRecently.fresh(ref, time.Now()) {
		close(w.done)
		return w
	}
	go func() {
		defer close(w.done)
		if w.err = s.sources.PutSource(ctx, ref, encodeSource(msgs)); w.err == nil {
			s.keptRecently.add(ref, time.Now())
		}
	}()
	return w
}

// keptMemo remembers the sources this replica kept in the last keptFresh, so that a
// conversation compacted again soon (a cache hit, a retry, a fork) is not sent to the store
// again only to renew a TTL of days. It holds at most keptMemoMax sources.
type keptMemo struct {
	mu sync.Mutex
	at map[cache.SourceRef]time.Time
}

const (
	keptFresh   = time.Minute
	keptMemoMax = 4096
)

// fresh reports whether ref was kept less than keptFresh before now.
func (k *keptMemo) fresh(ref cache.SourceRef, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	t, ok := k.at[ref]
	return ok && now.Sub(t) < keptFresh
}

// add remembers that ref was kept at now, forgetting the stale ones (all of them, when none
// is stale) when the memo is full.
func (k *keptMemo) add(ref cache.SourceRef, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.at == nil {
		k.at = map[cache.SourceRef]time.Time{}
	}
	if len(k.at) >= keptMemoMax {
		for r, t := range k.at {
			if now.Sub(t) >= keptFresh {
				delete(k.at, r)
			}
		}
		if len(k.at) >= keptMemoMax {
			clear(k.at)
		}
	}
	k.at[ref] = now
}

// join waits for the write to end: msgs point into the request's buffer, which is released
// when the call ends. Compact joins every write it starts before it returns.
func (w *sourceWrite) join() {
	if w != nil {
		<-w.done
	}
}

// wait returns the write's outcome: nil when the source is kept, a status error
// (RESOURCE_EXHAUSTED naming the budget) when Compact must fail, or a warning when Compact
// goes on without the source (the store unavailable).
func (w *sourceWrite) wait() (kept bool, warning string, err error) {
	<-w.done
	var be *cache.BudgetError
	switch {
	case w.err == nil:
		return true, "", nil
	case errors.As(w.err, &be):
		return false, "", grpcerr.WithDetails(status.New(codes.ResourceExhausted,
			be.Error()+" (--source-budget); set policy.discard_sources to compact without keeping the source"),
			&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
				Subject: "source-budget", Description: be.Error()}}})
	case errors.Is(w.err, cache.ErrUnavailable):
		// Checked before the context errors: a command past its Redis budget wraps
		// context.DeadlineExceeded too, while the caller's own deadline is still ahead.
	case errors.Is(w.err, context.Canceled), errors.Is(w.err, context.DeadlineExceeded):
		return false, "", w.err
	}
	return false, "the source could not be kept (the store is unavailable): it cannot be expanded", nil
}

// encodeSource encodes msgs as a source: each message's protobuf encoding as field 1 of a
// message, in order (the encoding of a repeated Message field, like ExpandResponse.messages).
func encodeSource(msgs []*compactorv1.Message) []byte {
	n := 0
	for _, m := range msgs {
		l := m.SizeVT()
		n += 1 + protowire.SizeVarint(uint64(l)) + l
	}
	b := make([]byte, 0, n)
	for _, m := range msgs {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(m.SizeVT()))
		mb, _ := m.MarshalVT() // a message that was decoded encodes
		b = append(b, mb...)
	}
	return b
}

// errCorrupt is a stored source that does not decode: never one written by encodeSource.
var errCorrupt = errors.New("source does not decode")

// sourceEntries splits a source into its messages' encodings.
func sourceEntries(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			return nil, errCorrupt
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, errCorrupt
		}
		out = append(out, v)
		b = b[n:]
	}
	return out, nil
}

// decodeMessage decodes one message of a source.
func decodeMessage(b []byte) (*compactorv1.Message, error) {
	m := &compactorv1.Message{}
	if err := m.UnmarshalVT(b); err != nil {
		return nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	return m, nil
}

// sourced completes resp with the source w kept (its hash and the recall_context tool, in
// target's format too when it is set; or the warning saying why there is none), or returns
// the error Compact must fail with. A nil w (sources off) changes nothing.
func sourced(resp *compactorv1.CompactResponse, w *sourceWrite, target compactorv1.Provider) error {
	if w == nil {
		return nil
	}
	kept, warning, err := w.wait()
	if err != nil {
		return err
	}
	if kept {
		resp.SourceHash = w.hash
		resp.RecallTool = recalltool.Tool()
		resp.RecallToolJson = recallToolJSON()[target]
	} else if warning != "" {
		resp.Warnings = append(resp.Warnings, warning)
	}
	return nil
}

// reserveMarker takes the source marker's tokens, as the plan reserved them
// (engine.Decision.MarkerTokens), from the summary room, so the summary message, marker
// included, stays within the room the plan counted. A plan that reserved none (sources off,
// or a window too small for a summary with a marker) leaves the summary naming no source
// (CompactResponse.source_hash still does).
func (c *compaction) reserveMarker(reserved int64) {
	if reserved == 0 {
		return
	}
	c.room -= reserved
	if c.src != nil {
		first := 0
		for first < c.cut && c.plan.GetDispositions()[first] == compactorv1.Disposition_DISPOSITION_KEEP {
			first++
		}
		c.marker = engine.SourceMarker(c.src.hash, engine.SourceRange{First: first, Last: c.cut - 1})
	}
}

// recallToolJSON holds recalltool.Tool in each provider's format (format.ToolJSON), by provider.
var recallToolJSON = sync.OnceValue(func() map[compactorv1.Provider]string {
	out := map[compactorv1.Provider]string{}
	for p := range compactorv1.Provider_name {
		if j, _, err := format.ToolJSON(compactorv1.Provider(p), recalltool.Tool()); err == nil {
			out[compactorv1.Provider(p)] = j
		}
	}
	return out
})

package engine

import (
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// The Counter remembers the plans Plan made for memoized conversations, so that planning
// one again under the same policy (the same request, sent again, or by another replica's
// client) copies the response instead of deciding again. Plans are remembered only for
// conversations the conversation memo holds, that is, seen at least twice: a conversation
// planned once per new message never pays for it. Decide, whose callers also need the
// pruned parts, always decides.

// planKey identifies a plan: the conversation's content, the caller's token counts (a keyed
// hash; they are not part of the content) and the resolved policy (a keyed hash; the
// remembered plan keeps the policy, compared in full).
type planKey struct {
	conv   convKey
	counts uint64
	policy uint64
}

// planShards is the number of shards of the plan memo, for the reason of convShards.
const planShards = 4

func (k planKey) shard() int { return int(k.policy >> 62) }

func (k planKey) fp() uint64 {
	return k.conv.fp() ^ bits.RotateLeft64(k.counts, 17) ^ bits.RotateLeft64(k.policy, 41)
}

// rememberedPlan is a plan as Plan returned it and the policy it was made under. Both are
// immutable: lookup returns copies.
type rememberedPlan struct {
	pol  policy
	resp *compactorv1.PlanResponse
}

// Memory charged for a remembered plan: the entry, its response and memo slot, and per
// message a disposition and a count.
const (
	planEntryBytes      = 512
	planPerMessageBytes = 4 + 8
)

// newPlanKey returns the key of the plan of msgs, a conversation whose content key is conv,
// under pol: kr hashes the caller's token counts and the policy.
func newPlanKey(kr *keyer, conv convKey, msgs []*compactorv1.Message, pol *policy) planKey {
	return planKey{conv: conv, counts: tokenCountsHash(kr, msgs), policy: policyHash(kr, pol)}
}

// tokenCountsHash is a keyed hash of the token_count of every message of msgs.
func tokenCountsHash(kr *keyer, msgs []*compactorv1.Message) uint64 {
	k := &kr.secret
	h := kr.init ^ uint64(len(msgs))
	i := 0
	for ; i+1 < len(msgs); i += 2 {
		h = wymix(uint64(msgs[i].GetTokenCount())^k[1], uint64(msgs[i+1].GetTokenCount())^h)
	}
	if i < len(msgs) {
		h = wymix(uint64(msgs[i].GetTokenCount())^k[2], h^k[3])
	}
	return h
}

// policyHash is a keyed hash of the resolved policy pol.
func policyHash(kr *keyer, pol *policy) uint64 {
	k := &kr.secret
	h := kr.init
	for _, w := range [...][2]uint64{
		{uint64(pol.window), uint64(pol.reserve)},
		{uint64(pol.usable), uint64(pol.trigger)},
		{uint64(pol.target), math.Float64bits(pol.triggerRatio)},
		{uint64(pol.keepTokens), uint64(pol.keepTurns)},
		{uint64(pol.summaryRoom), uint64(pol.tokenizer)},
		{uint64(pol.usageTokens), uint64(pol.usageCount)},
		{b2u(pol.pruneOff) | b2u(pol.clearInputs)<<1 | uint64(len(pol.excludeTools))<<2, uint64(pol.keepResults)},
		{uint64(pol.minOutput), uint64(pol.clearAtLeast)},
		{uint64(pol.keepRequests), b2u(pol.roomGrows) | b2u(pol.targetFromTurns)<<1 | uint64(pol.headroomTurns)<<2},
		{math.Float64bits(pol.cacheRead), math.Float64bits(pol.cacheWrite)},
		{maphash.String(kr.seed, pol.source), uint64(pol.refTokens)},
		{uint64(pol.markerTokens), uint64(pol.sourceMessages)},
	} {
		h = wymix(w[0]^k[1], w[1]^h)
	}
	for _, tool := range pol.excludeTools {
		h = wymix(maphash.String(kr.seed, tool)^k[2], uint64(len(tool))^h)
	}
	return h
}

// equal reports whether two resolved policies are the same.
func (r *policy) equal(o *policy) bool {
	return r.window == o.window && r.reserve == o.reserve && r.usable == o.usable &&
		r.trigger == o.trigger && r.target == o.target && r.triggerRatio == o.triggerRatio &&
		r.keepTokens == o.keepTokens && r.keepTurns == o.keepTurns && r.summaryRoom == o.summaryRoom &&
		r.tokenizer == o.tokenizer && r.usageTokens == o.usageTokens && r.usageCount == o.usageCount &&
		r.pruneOff == o.pruneOff && r.keepResults == o.keepResults && r.minOutput == o.minOutput &&
		slices.Equal(r.excludeTools, o.excludeTools) && r.clearInputs == o.clearInputs &&
		r.clearAtLeast == o.clearAtLeast && r.keepRequests == o.keepRequests && r.roomGrows == o.roomGrows &&
		r.targetFromTurns == o.targetFromTurns && r.headroomTurns == o.headroomTurns &&
		r.cacheRead == o.cacheRead && r.cacheWrite == o.cacheWrite &&
		r.source == o.source && r.refTokens == o.refTokens &&
		r.markerTokens == o.markerTokens && r.sourceMessages == o.sourceMessages
}

// planMemo is the Counter's memo of plans.
type planMemo struct {
	memo *memo[planKey, *rememberedPlan]
}

// lookup returns a copy of the plan remembered under k, if it was made under pol.
func (pm *planMemo) lookup(k planKey, pol *policy) *compactorv1.PlanResponse {
	e, ok := pm.memo.get(k.shard(), k)
	if !ok || !e.pol.equal(pol) {
		return nil
	}
	return copyPlanResponse(e.resp)
}

// store remembers a copy of resp, made under pol, under k.
func (pm *planMemo) store(k planKey, pol *policy, resp *compactorv1.PlanResponse) {
	e := &rememberedPlan{pol: *pol, resp: copyPlanResponse(resp)}
	// The request's slice and strings are the caller's, and a decoded request's strings may
	// share memory with the whole request (the service's codec): keep copies of our own.
	e.pol.excludeTools = make([]string, len(pol.excludeTools))
	for i, t := range pol.excludeTools {
		e.pol.excludeTools[i] = strings.Clone(t)
	}
	size := int64(planEntryBytes) + int64(len(resp.GetMessageTokens()))*planPerMessageBytes +
		int64(len(resp.GetReason())+len(resp.GetPrefixHash()))
	pm.memo.put(k.shard(), k, e, size)
}

// copyPlanResponse returns a copy of r that shares nothing mutable with it.
func copyPlanResponse(r *compactorv1.PlanResponse) *compactorv1.PlanResponse {
	return &compactorv1.PlanResponse{
		Action:            r.GetAction(),
		Reason:            r.GetReason(),
		Dispositions:      slices.Clone(r.GetDispositions()),
		MessageTokens:     slices.Clone(r.GetMessageTokens()),
		TokensBefore:      r.GetTokensBefore(),
		TokensAfter:       r.GetTokensAfter(),
		CutIndex:          r.GetCutIndex(),
		PrefixHash:        r.GetPrefixHash(),
		PrunedTokens:      r.GetPrunedTokens(),
		SummaryIndex:      r.GetSummaryIndex(),
		UsableTokens:      r.GetUsableTokens(),
		TriggerAtTokens:   r.GetTriggerAtTokens(),
		TargetTokens:      r.GetTargetTokens(),
		HeadTokens:        r.GetHeadTokens(),
		SummaryTokens:     r.GetSummaryTokens(),
		KeptRequestTokens: r.GetKeptRequestTokens(),
		TailTokens:        r.GetTailTokens(),
		CutTokens:         r.GetCutTokens(),

		InstructionIndexes: slices.Clone(r.GetInstructionIndexes()),
		InstructionTokens:  r.GetInstructionTokens(),
		CachedPrefixTokens: r.GetCachedPrefixTokens(),
		RewrittenTokens:    r.GetRewrittenTokens(),
		TurnTokens:         r.GetTurnTokens(),
		HeadroomTurns:      r.GetHeadroomTurns(),
	}
}

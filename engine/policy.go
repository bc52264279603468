package engine

import (
	"fmt"
	"math"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// Policy defaults. A zero field of compactorv1.Policy means its default.
const (
	// DefaultTriggerRatio is the share of the usable window above which Plan acts.
	DefaultTriggerRatio = 0.8
	// DefaultTargetRatio is the share of the usable window an action aims at.
	DefaultTargetRatio = 0.6
	// DefaultKeepRecentRatio is the share of the usable window kept verbatim after a summary.
	DefaultKeepRecentRatio = 0.3
	// DefaultKeepRecentTurns is the number of newest turns that always stay verbatim.
	DefaultKeepRecentTurns = 2
	// DefaultSummaryMaxTokens caps the default room reserved for a summary message.
	DefaultSummaryMaxTokens = 2000
	// DefaultSummaryRatio is the share of the usable window the default summary room takes,
	// up to DefaultSummaryMaxTokens.
	DefaultSummaryRatio = 0.15
	// MinSummaryTextTokens is the least summary text a compaction asks for: the summary
	// room never shrinks below it plus the summary message's framing.
	MinSummaryTextTokens = 64
	// DefaultKeepUserMessagesTokens caps the default budget of the requests kept verbatim
	// after a summary.
	DefaultKeepUserMessagesTokens = 20000
	// DefaultKeepUserMessagesRatio is the share of the usable window the default budget of
	// the requests kept verbatim takes, up to DefaultKeepUserMessagesTokens.
	DefaultKeepUserMessagesRatio = 0.2
	// DefaultMaxReserve caps the default reply reserve (min(20000, window/10)).
	DefaultMaxReserve = 20000
	// DefaultPruneKeepRecent is the number of newest tool results never pruned.
	DefaultPruneKeepRecent = 3
	// DefaultPruneMinOutputTokens is the smallest tool output pruning touches.
	DefaultPruneMinOutputTokens = 200
	// DefaultHeadroomTurns is how many of the session's own turns the default target leaves
	// below the trigger: a compaction that lands there is followed by that many turns, at
	// the session's median size, before the next one, so each compaction's rewrite of the
	// provider's prompt cache is paid over many cheap cached turns.
	DefaultHeadroomTurns = 8
	// DefaultMinTargetRatio is the least share of the usable window the default target goes
	// down to for a session of large turns: below it a compaction would keep too little of
	// the newest turns verbatim.
	DefaultMinTargetRatio = 0.35
	// MinTurnsForMedian is the fewest active turns whose median size sets the default
	// target; with fewer, the target is DefaultTargetRatio of the usable window.
	MinTurnsForMedian = 3
	// DefaultCacheReadPrice and DefaultCacheWritePrice are a provider's prompt-cache prices
	// as multiples of its input token price: Anthropic's (a read costs a tenth, a write a
	// quarter more).
	DefaultCacheReadPrice  = 0.1
	DefaultCacheWritePrice = 1.25
	// PaybackTurns is how many turns pruning in place must pay its cache rewrite back
	// within, when clear_at_least_tokens is not set (see pruneClearAtLeast).
	PaybackTurns = 8
)

// Tokenizer names accepted in Policy.tokenizer.
const (
	TokenizerO200k  = tokenizer.NameO200k
	TokenizerCl100k = tokenizer.NameCl100k
	TokenizerApprox = tokenizer.NameApprox
)

// policy is a validated Policy with every default applied.
type policy struct {
	window       int64 // 0 when only trigger_tokens was given
	reserve      int64
	usable       int64
	trigger      int64
	target       int64
	triggerRatio float64 // 0 when trigger_tokens was given
	// targetFromTurns is set when the target is the default, which follows the session's
	// turns (see sessionTarget); target is then DefaultTargetRatio of usable until a plan
	// measures them.
	targetFromTurns bool
	headroomTurns   int
	cacheRead       float64
	cacheWrite      float64
	keepTokens      int64
	keepTurns       int
	summaryRoom     int64 // the room reserved for the summary message
	roomGrows       bool  // the room is the default, which grows into what the target leaves unused
	keepRequests    int64 // the budget of the requests kept verbatim; < 0: only the newest
	tokenizer       tokenizer.ID
	// source is Options.Source for a conversation of sourceMessages messages, refTokens the
	// most tokens naming it in an output's marker or cut note takes, and markerTokens what
	// the summary room holds for the summary's source marker (see keepSource and
	// deciding.decide).
	source         string
	sourceMessages int
	refTokens      int64
	markerTokens   int64
	usageTokens    int64
	usageCount     int

	pruneOff     bool
	keepResults  int
	minOutput    int64
	excludeTools []string
	clearInputs  bool
	clearAtLeast int64
}

// resolvePolicyInto checks a policy on its own (without the conversation) and resolves it
// into *r, every default applied; it allocates only to report violations. It returns nil or
// a *ValidationError (wrapping ErrInvalid) naming every offending field by its request path,
// e.g. "policy.trigger_ratio". A nil policy is invalid: a window or trigger is required.
//
// The rules: context_window ≥ 0, and > 0 unless trigger_tokens is set; reserve_output_tokens
// ≥ 0 and < context_window; ratios in (0, 1] when set, target_ratio ≤ trigger_ratio,
// prepare_ratio in (0, 1) when set;
// trigger_tokens, keep_recent_tokens ≥ 0 and not above the usable window (window − reserve);
// keep_recent_turns ≥ 0; summary_max_tokens ≥ 0 and below the usable window; tokenizer one of
// "", "o200k_base", "cl100k_base", "approx"; reported_usage counts ≥ 0, with message_count set
// when input_tokens is; prune counts ≥ 0 and exclude_tools names non-empty.
// Plan additionally checks reported_usage.message_count against the conversation length.
func resolvePolicyInto(p *compactorv1.Policy, r *policy) error {
	var violations []FieldViolation
	add := func(field, desc string) {
		violations = append(violations, FieldViolation{Field: "policy." + field, Description: desc})
	}
	if p == nil {
		add("context_window", "a policy with context_window or trigger_tokens is required")
		return &ValidationError{Violations: violations}
	}
	*r = policy{window: p.GetContextWindow()}
	switch {
	case r.window < 0:
		add("context_window", fmt.Sprintf("must not be negative, got %d", r.window))
	case r.window == 0 && p.GetTriggerTokens() <= 0:
		add("context_window", "required (> 0) unless trigger_tokens is set")
	}
	r.reserve = p.GetReserveOutputTokens()
	switch {
	case r.reserve < 0:
		add("reserve_output_tokens", fmt.Sprintf("must not be negative, got %d", r.reserve))
	case r.reserve == 0 && r.window > 0:
		r.reserve = min(DefaultMaxReserve, r.window/10)
	case r.window > 0 && r.reserve >= r.window:
		add("reserve_output_tokens", fmt.Sprintf("must be less than context_window (%d), got %d", r.window, r.reserve))
	case r.window == 0 && r.reserve > 0:
		add("reserve_output_tokens", "needs context_window")
	}
	ratio := func(field string, x, def float64) float64 {
		if x == 0 {
			return def
		}
		if !(x > 0 && x <= 1) { // also rejects NaN
			add(field, fmt.Sprintf("must be in (0, 1], got %v", x))
			return def
		}
		return x
	}
	tr := ratio("trigger_ratio", p.GetTriggerRatio(), DefaultTriggerRatio)
	gr := ratio("target_ratio", p.GetTargetRatio(), DefaultTargetRatio)
	if p.GetTargetRatio() != 0 && gr > tr && p.GetTriggerTokens() <= 0 {
		add("target_ratio", fmt.Sprintf("must not exceed trigger_ratio (%v), got %v", tr, gr))
	}
	if x := p.GetPrepareRatio(); x != 0 && !(x > 0 && x < 1) { // also rejects NaN
		add("prepare_ratio", fmt.Sprintf("must be in (0, 1), got %v", x))
	}
	if len(violations) > 0 {
		// The window is unusable; the checks below depend on it.
		return &ValidationError{Violations: violations}
	}

	tt := p.GetTriggerTokens()
	if r.window > 0 {
		r.usable = r.window - r.reserve
	} else {
		// Without a window the trigger stands in for the usable window.
		r.usable = tt
	}
	switch {
	case tt < 0:
		add("trigger_tokens", fmt.Sprintf("must not be negative, got %d", tt))
	case tt > r.usable:
		add("trigger_tokens", fmt.Sprintf("must not exceed the usable window (context_window − reserve_output_tokens = %d), got %d", r.usable, tt))
	case tt > 0:
		r.trigger = tt
	default:
		r.triggerRatio = tr
		r.trigger = floorRatio(tr, r.usable)
	}
	r.target = min(floorRatio(gr, r.usable), r.trigger)
	r.targetFromTurns = p.GetTargetRatio() == 0
	switch n := p.GetHeadroomTurns(); {
	case n < 0:
		add("headroom_turns", fmt.Sprintf("must not be negative, got %d", n))
	case n == 0:
		r.headroomTurns = DefaultHeadroomTurns
	default:
		r.headroomTurns = int(n)
	}
	r.cacheRead, r.cacheWrite = DefaultCacheReadPrice, DefaultCacheWritePrice
	if cp := p.GetCachePrices(); cp != nil {
		if w := cp.GetWrite(); w != 0 {
			r.cacheWrite = w
		}
		if rd := cp.GetRead(); rd != 0 {
			r.cacheRead = rd
		}
		switch {
		case !(r.cacheWrite > 0) || math.IsInf(r.cacheWrite, 0):
			add("cache_prices.write", fmt.Sprintf("must be positive, got %v", cp.GetWrite()))
		case !(r.cacheRead > 0 && r.cacheRead < r.cacheWrite):
			add("cache_prices.read", fmt.Sprintf("must be in (0, write %v), got %v", r.cacheWrite, r.cacheRead))
		}
	}

	r.keepTokens = p.GetKeepRecentTokens()
	switch {
	case r.keepTokens < 0:
		add("keep_recent_tokens", fmt.Sprintf("must not be negative, got %d", r.keepTokens))
	case r.keepTokens > r.usable:
		add("keep_recent_tokens", fmt.Sprintf("must not exceed the usable window (%d), got %d", r.usable, r.keepTokens))
	case r.keepTokens == 0:
		r.keepTokens = floorRatio(DefaultKeepRecentRatio, r.usable)
	}
	switch n := p.GetKeepRecentTurns(); {
	case n < 0:
		add("keep_recent_turns", fmt.Sprintf("must not be negative, got %d", n))
	case n == 0:
		r.keepTurns = DefaultKeepRecentTurns
	default:
		r.keepTurns = int(n)
	}
	// A default never makes a request invalid: the summary room and the requests' budget
	// follow the usable window unless the caller set them.
	r.summaryRoom = p.GetSummaryMaxTokens()
	switch {
	case r.summaryRoom < 0:
		add("summary_max_tokens", fmt.Sprintf("must not be negative, got %d", r.summaryRoom))
	case r.summaryRoom == 0:
		r.summaryRoom = min(DefaultSummaryMaxTokens, floorRatio(DefaultSummaryRatio, r.usable))
		r.roomGrows = true
	case r.summaryRoom >= r.usable && r.usable > 0:
		add("summary_max_tokens", fmt.Sprintf("must be less than the usable window (%d), got %d", r.usable, r.summaryRoom))
	}
	switch r.keepRequests = p.GetKeepUserMessagesTokens(); {
	case r.keepRequests < 0:
		r.keepRequests = -1
	case r.keepRequests == 0:
		r.keepRequests = min(DefaultKeepUserMessagesTokens, floorRatio(DefaultKeepUserMessagesRatio, r.usable))
	}
	tk, ok := tokenizer.Parse(p.GetTokenizer())
	if !ok {
		add("tokenizer", fmt.Sprintf("unknown tokenizer %q (want o200k_base, cl100k_base or approx)", p.GetTokenizer()))
	}
	r.tokenizer = tk
	if u := p.GetReportedUsage(); u != nil {
		switch {
		case u.GetInputTokens() < 0:
			add("reported_usage.input_tokens", fmt.Sprintf("must not be negative, got %d", u.GetInputTokens()))
		case u.GetMessageCount() < 0:
			add("reported_usage.message_count", fmt.Sprintf("must not be negative, got %d", u.GetMessageCount()))
		case u.GetInputTokens() > 0 && u.GetMessageCount() == 0:
			add("reported_usage.message_count", "required when input_tokens is set")
		case u.GetInputTokens() == 0 && u.GetMessageCount() > 0:
			add("reported_usage.input_tokens", "required when message_count is set")
		default:
			r.usageTokens, r.usageCount = u.GetInputTokens(), int(u.GetMessageCount())
		}
	}
	pp := p.GetPrune()
	r.pruneOff = pp.GetDisabled()
	switch n := pp.GetKeepRecent(); {
	case n < 0:
		add("prune.keep_recent", fmt.Sprintf("must not be negative, got %d", n))
	case n == 0:
		r.keepResults = DefaultPruneKeepRecent
	default:
		r.keepResults = int(n)
	}
	switch n := pp.GetMinOutputTokens(); {
	case n < 0:
		add("prune.min_output_tokens", fmt.Sprintf("must not be negative, got %d", n))
	case n == 0:
		r.minOutput = DefaultPruneMinOutputTokens
	default:
		r.minOutput = n
	}
	for i, name := range pp.GetExcludeTools() {
		if name == "" {
			add(fmt.Sprintf("prune.exclude_tools[%d]", i), "must not be empty")
		}
	}
	r.excludeTools = pp.GetExcludeTools()
	r.clearInputs = pp.GetClearInputs()
	r.clearAtLeast = pp.GetClearAtLeastTokens()
	if r.clearAtLeast < 0 {
		add("prune.clear_at_least_tokens", fmt.Sprintf("must not be negative, got %d", r.clearAtLeast))
	}
	if len(violations) > 0 {
		return &ValidationError{Violations: violations}
	}
	return nil
}

// floorRatio returns ⌊ratio × n⌋, tolerating the binary representation of decimal ratios
// (0.6 × 115200 is 69120, not 69119).
func floorRatio(ratio float64, n int64) int64 {
	return int64(math.Floor(ratio*float64(n) + 1e-6))
}

// sessionTarget returns the target of a session whose median turn is turn tokens (0: too few
// turns to tell): with the default target, min(DefaultTargetRatio × usable, trigger −
// headroom_turns × turn), at least DefaultMinTargetRatio × usable (and at most the trigger);
// otherwise the target the policy resolved.
func (pol *policy) sessionTarget(turn int64) int64 {
	if !pol.targetFromTurns || turn <= 0 {
		return pol.target
	}
	t := pol.trigger - int64(pol.headroomTurns)*turn
	return min(max(t, floorRatio(DefaultMinTargetRatio, pol.usable)), pol.target, pol.trigger)
}

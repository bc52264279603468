package engine

import (
	"math"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// The decision of Plan and Decide, in the order the spec gives it, from the measured
// conversation and its costs (measure.go, costs.go) and the policy alone:
//
//  1. under the trigger: nothing (unless forced);
//  2. pruning old tool outputs reaches the target, removing enough to pay back the prompt
//     cache it rewrites (clearAtLeast): prune, the oldest outputs only, until both are met
//     (prunetarget.go);
//  3. otherwise compact to the target: summarize the older turns, keeping the newest ones
//     verbatim (as many as the tail budget allows, at least keep_recent_turns) and the
//     user's requests after the summary. Toward the target the shape gives up, each step
//     only when the previous ones are not enough: more turns go into the summary (down to
//     keep_recent_turns), oversized tool outputs the agent has acted on already (in the
//     tail's older turns) are cut, the summary room gives up to half of itself, and fewer
//     turns are kept (down to the newest one). The newest turn whole and the requests kept
//     verbatim yield only to the trigger: when the shape is still above the trigger it
//     shrinks further: the requests other than the newest go into the summary, the summary
//     room shrinks to its least, and the newest turn's outputs are cut too. With too few
//     turns to summarize, pruning and cutting alone are tried first.
//
// Landing at the target rather than just under the trigger leaves the session turns of
// headroom before its next compaction (see policy.sessionTarget); a shape that stays above the
// target says why. What cannot get under the trigger even so is compacted as far as it goes
// when that fits the usable window (the reason says the next turn compacts again), and is
// irreducible otherwise. The requests kept verbatim are chosen here (keptRequests), the tool
// outputs cut in cutoutput.go; the response is written by response.go.

// deciding is one decision in progress: the measured conversation and the policy. None of
// its methods counts a message the measurement counted.
type deciding struct {
	msgs   []*compactorv1.Message
	pol    policy
	opt    Options
	lay    layout
	counts []msgCount
	costs
	sc   *scratch
	tail []int64 // tail sizes after pruning, per turn start (see tailSizes), once summarizing needs them
	head []int64 // the head per turn start (see headAt), once summarizing needs it and messages split
	// superseded marks the messages whose pruned parts are all superseded outputs (or their
	// inputs), which pruning to the target prunes whatever their age (markSuperseded).
	superseded []bool
	// prunedSet is the tool outputs pruning replaces, by message and part (−1 for an
	// observation), once cutting needs them (see prunedOutputs).
	prunedSet map[[2]int]bool
	// textCounts is the counts of the texts of the tool outputs cutting has weighed, by
	// message and part (see cutCounts).
	textCounts map[[2]int][]*textCounts
}

// decide returns the shape the conversation takes: the steps of the file's comment, in
// order. When no shape fits the usable window, the least one is returned with irreducible
// set.
func (dc *deciding) decide() shape {
	pol, sz, pr := &dc.pol, dc.sz, dc.pr
	if !dc.acting {
		return shape{action: compactorv1.Action_ACTION_NONE, after: sz.before}
	}
	turns := len(dc.lay.turnStarts)
	if !dc.opt.Force && pr.total > 0 && pr.total >= dc.clearAtLeast() && sz.before-pr.total <= pol.target {
		return dc.pruneToTarget()
	}
	if turns <= pol.keepTurns && sz.before-pr.total <= pol.target {
		// Too few turns to summarize, and pruning is enough or nothing is due (forced).
		return dc.withoutSummary(turns)
	}
	// A summary room the caller set (summary_max_tokens) holds the marker within it, or no
	// marker when it cannot beside the least text (not this source's own count: the room
	// would then depend on the hash, and a preparation's differ from its compaction's).
	if !pol.roomGrows && pol.markerTokens > 0 && dc.minRoom() > pol.summaryRoom {
		pol.markerTokens = 0
	}
	sh := dc.compact(turns)
	if pol.markerTokens > 0 && (sh.irreducible || sh.after > pol.target) {
		sh = dc.withMarker(turns, sh)
	}
	return sh
}

// withMarker returns the shape to compact to when the summary's source marker, in sh, may
// have cost what the next turns need: the marker yields to the window, the trigger, the
// newest turns and the requests kept verbatim, in that order. The shapes with the bound
// of any marker (sh), with this source's own marker, and without one (the summary then
// names no source; the cut outputs' notes and the pruned outputs' markers still do) are
// compared, and the first that keeps the most is taken. Only here does the room depend on
// the hash (see sourceMarkerTokens): in a window too small for the bound, where a
// preparation's room may differ from its compaction's by a few tokens.
func (dc *deciding) withMarker(turns int, sh shape) shape {
	pol := &dc.pol
	best, marker := sh, pol.markerTokens
	for _, m := range [...]int64{pol.exactMarkerTokens(), 0} {
		pol.markerTokens = m
		if o := dc.compact(turns); keepsMore(o, best, pol.trigger) {
			best, marker = o, m
		}
	}
	pol.markerTokens = marker
	return best
}

// keepsMore reports whether shape a keeps more than b: it fits the window where b does not,
// the trigger where b does not, more turns verbatim, or more of the requests.
func keepsMore(a, b shape, trigger int64) bool {
	switch {
	case a.irreducible != b.irreducible:
		return b.irreducible
	case (a.after <= trigger) != (b.after <= trigger):
		return a.after <= trigger
	case a.action != b.action || a.action != compactorv1.Action_ACTION_SUMMARIZE:
		return false
	case a.k != b.k:
		return a.k < b.k
	}
	return a.reqs > b.reqs
}

// shape is one way to compact the conversation: what stays, and what it costs.
type shape struct {
	action compactorv1.Action
	pruned bool // the prunable tool outputs are pruned
	// spare, when partial, is the first message whose prunable outputs are not pruned:
	// pruning to the target prunes the oldest only (prunetarget.go); unless partial, none is
	// spared.
	spare   int
	partial bool
	// For ACTION_SUMMARIZE: the turn the cut is before, the summary room, and the requests
	// kept verbatim (all that fit their budget, or only the newest).
	k    int
	room int64
	reqs int64
	// reqBudget bounds the requests kept verbatim (keptRequests); below the policy's, the
	// shape folded the requests that no longer fit into the summary, oldest first.
	reqBudget int64
	// Tool outputs cut (never below MinCutOutputTokens): how much that saves.
	cuts []CutPart
	cut  int64
	// The tokens after: head + summary + requests + tail. The head is the conversation's,
	// with the standing instructions split from the messages a summary folds or keeps as
	// requests (see splits).
	head, tail, after int64
	// keep is the number of newest turns the shape keeps at least; few is set when that is
	// every active turn (nothing can be summarized).
	keep int
	few  bool
	// smallest is set on ACTION_NONE when no compaction would make the conversation smaller;
	// enough on ACTION_PRUNE when pruning alone reaches the target.
	smallest, enough bool
	// irreducible is set when even this shape, the least there is, exceeds the usable window;
	// neverCut when what no compaction cuts (the head and the user's newest request, then in
	// after and reqs) alone does.
	irreducible, neverCut bool
	// least is, for a summary that stays above the target, the least toward it (targetFloor).
	least int64
}

// withoutSummary is the answer when too few turns are active to summarize (turns ≤
// keep_recent_turns) and the pruned conversation is under the trigger, or the call is forced:
// prune if pruning pays (or the conversation is over the usable window), else nothing.
func (dc *deciding) withoutSummary(turns int) shape {
	pol, sz, prunable := &dc.pol, dc.sz, dc.pr.total
	sh := shape{action: compactorv1.Action_ACTION_NONE, after: sz.before, keep: turns, few: true}
	if prunable > 0 && (sz.before > pol.usable || !dc.opt.Force && prunable >= dc.clearAtLeast()) {
		sh.action, sh.pruned, sh.after = compactorv1.Action_ACTION_PRUNE, true, sz.before-prunable
	}
	return sh
}

// compact returns the shape that reaches the target keeping the most, or, when none does,
// the first that fits under the trigger (see the file's comment); when none does, the
// smallest one, marked irreducible unless it fits the usable window.
func (dc *deciding) compact(turns int) shape {
	pol := &dc.pol
	if sh := dc.neverCut(); sh.irreducible {
		return sh
	}
	var best, first shape // the smallest shape, and the first under the trigger
	for keep := pol.keepTurns; ; keep-- {
		var sh shape
		if turns > keep {
			sh = dc.summarizeShape(turns, keep)
		} else {
			sh = dc.pruneShape(turns)
		}
		if sh.after <= pol.target {
			return sh
		}
		if first.action == compactorv1.Action_ACTION_UNSPECIFIED && sh.after <= pol.trigger {
			first = sh
		}
		if best.action == compactorv1.Action_ACTION_UNSPECIFIED || sh.after < best.after {
			best = sh
		}
		if keep <= 1 || turns < 2 {
			break
		}
	}
	if first.action != compactorv1.Action_ACTION_UNSPECIFIED {
		// No shape reaches the target: the one that keeps the most turns under the trigger.
		if first.action == compactorv1.Action_ACTION_SUMMARIZE {
			first.least = dc.targetFloor(turns)
		}
		return first
	}
	if turns > pol.keepTurns {
		// Keeping every turn, pruned and cut, may cost less than the least summary.
		if sh := dc.pruneShape(turns); sh.after < best.after {
			best = sh
		}
	}
	if best.after >= dc.sz.before && dc.sz.before <= pol.usable {
		// Nothing makes it smaller, and it fits as it is.
		return shape{action: compactorv1.Action_ACTION_NONE, after: dc.sz.before, keep: turns, few: turns <= pol.keepTurns, smallest: true}
	}
	best.irreducible = best.after > pol.usable
	return best
}

// pruneShape prunes every prunable output of the active region, then cuts oversized tool
// outputs: those of the older turns toward the target, the newest turn's too when that is not
// under the trigger, until it fits or nothing more can be cut.
func (dc *deciding) pruneShape(turns int) shape {
	sh := shape{action: compactorv1.Action_ACTION_PRUNE, pruned: dc.pr.total > 0, keep: turns, few: turns <= dc.pol.keepTurns}
	sh.head, sh.tail = dc.sz.head, dc.sz.active-dc.pr.total
	sh.after = sh.head + dc.sz.summary + sh.tail
	dc.cutOutputs(&sh, dc.lay.summary+1, dc.newestTurn(), dc.pol.target)
	if sh.after > dc.pol.trigger {
		dc.cutOutputs(&sh, dc.lay.summary+1, len(dc.msgs), dc.pol.trigger)
	}
	if !sh.pruned && sh.cuts == nil {
		sh.action = compactorv1.Action_ACTION_NONE
	}
	return sh
}

// summarizeShape summarizes the turns before a cut that keeps at least keep turns, shrinking
// the shape step by step until it fits under the target (see the file's comment).
func (dc *deciding) summarizeShape(turns, keep int) shape {
	pol := &dc.pol
	if dc.tail == nil {
		dc.prepareSummary(turns)
	}
	kMax := turns - keep // the last cut that keeps keep turns; ≥ 1
	sh := shape{action: compactorv1.Action_ACTION_SUMMARIZE, pruned: true, room: max(pol.summaryRoom, dc.minRoom()), reqBudget: pol.keepRequests, keep: keep}
	requests := func(k int) int64 {
		return keptRequests(dc.reqs, int(dc.lay.turnStarts[k]), dc.sp.rest, sh.reqBudget, nil)
	}
	// The cut: the most turns whose tail fits keep_recent_tokens and whose whole fits the
	// target; else the fewest turns allowed.
	sh.k = kMax
	for j := 1; j <= kMax; j++ {
		if dc.tail[j] <= pol.keepTokens && dc.headAt(j)+requests(j)+sh.room+dc.tail[j] <= pol.target {
			sh.k = dc.preferUserTurn(j, kMax)
			break
		}
	}
	total := func() {
		sh.reqs = requests(sh.k)
		sh.head = dc.headAt(sh.k)
		sh.tail = dc.tail[sh.k] - sh.cut
		sh.after = sh.head + sh.room + sh.reqs + sh.tail
	}
	total()
	if slack := pol.target - sh.after; slack > 0 && pol.roomGrows {
		// The default room grows into what the target leaves unused, up to twice its size: a
		// longer summary keeps more of what the next turns use.
		sh.room += min(slack, sh.room)
		total()
	}
	if sh.after <= pol.target {
		return sh
	}
	// Toward the target: cut the oversized tool outputs the agent has acted on already, those
	// of the tail's older turns; then the summary room gives up to half its default, when that
	// is enough to reach it.
	dc.cutOutputs(&sh, int(dc.lay.turnStarts[sh.k]), dc.newestTurn(), pol.target)
	if over := sh.after - pol.target; over > 0 && sh.room-dc.roomFloor() >= over {
		sh.room -= over
		total()
	}
	if sh.after <= pol.trigger {
		return sh
	}
	// Under the trigger: 1. The fewest requests go into the summary, whole: the kept ones'
	// budget shrinks by what is over, so the newest stays, then the task, then the newest
	// others that still fit; the oldest go first.
	if over := sh.after - pol.trigger; over > 0 && sh.reqs > 0 {
		sh.reqBudget = max(sh.reqs-over, -1)
		total()
	}
	// 2. A smaller summary room.
	if over := sh.after - pol.trigger; over > 0 {
		sh.room = max(dc.minRoom(), sh.room-over)
		total()
	}
	// 3. Cut oversized tool outputs after the cut, the newest turn's included; what that frees
	// beyond the need goes back to the summary room, then to the other requests.
	dc.cutOutputs(&sh, int(dc.lay.turnStarts[sh.k]), len(dc.msgs), pol.trigger)
	if slack := pol.trigger - sh.after; slack > 0 && sh.cuts != nil {
		sh.room = min(max(pol.summaryRoom, dc.minRoom()), sh.room+slack)
		folded := sh.reqBudget
		sh.reqBudget = pol.keepRequests
		if total(); sh.after > pol.trigger {
			sh.reqBudget = folded
			total()
		}
	}
	return sh
}

// newestTurn is the index of the first message of the newest turn.
func (dc *deciding) newestTurn() int {
	if n := len(dc.lay.turnStarts); n > 0 {
		return int(dc.lay.turnStarts[n-1])
	}
	return len(dc.msgs)
}

// prepareSummary computes what every summarizing shape needs: the tail sizes, and the head
// at each cut when messages split (see headAt).
func (dc *deciding) prepareSummary(turns int) {
	dc.sc.tail = resize(dc.sc.tail, turns+1)
	dc.tail = dc.sc.tail
	tailSizes(dc.tail, &dc.lay, dc.sz.tokens, dc.pr.saved)
	if dc.sp.head != nil {
		dc.sc.headAt = resize(dc.sc.headAt, turns+1)
		dc.head = dc.sc.headAt
		headSizes(dc.head, &dc.lay, dc.sz.head, dc.sp.head)
	}
}

// headAt is the head a summary cutting before turn k keeps: the conversation's head and the
// standing instructions split from the messages before the cut.
func (dc *deciding) headAt(k int) int64 {
	if dc.head == nil {
		return dc.sz.head
	}
	return dc.head[k]
}

// headSizes sets head[k] to the head a cut before turn start k keeps: head plus split of the
// active messages before it.
func headSizes(head []int64, lay *layout, base int64, split []int64) {
	sum, k := base, 0
	for i := range lay.class {
		for k < len(lay.turnStarts) && int(lay.turnStarts[k]) == i {
			head[k] = sum
			k++
		}
		sum += split[i]
	}
	for ; k < len(head); k++ {
		head[k] = sum
	}
}

// targetFloor is the least a summary reaches toward the target: the head at a cut before the
// newest turn, the requests kept verbatim there, half the summary room (roomFloor) and the
// newest turn whole, pruned as the summary prunes it. Only the trigger takes more.
// It is asked of a summarizing shape only, so the tail sizes are known.
func (dc *deciding) targetFloor(turns int) int64 {
	k := turns - 1
	reqs := keptRequests(dc.reqs, int(dc.lay.turnStarts[k]), dc.sp.rest, dc.pol.keepRequests, nil)
	return dc.headAt(k) + reqs + dc.roomFloor() + dc.tail[k]
}

// minRoom is the least summary room: the framing, the source marker when the compaction
// keeps a source, and MinSummaryTextTokens of text.
func (dc *deciding) minRoom() int64 { return dc.frame + dc.pol.markerTokens + MinSummaryTextTokens }

// roomFloor is the least summary room a shape reserves to reach the target (rather than the
// trigger): half the policy's room, at least minRoom.
func (dc *deciding) roomFloor() int64 { return max(dc.pol.summaryRoom/2, dc.minRoom()) }

// neverCut returns, marked irreducible, the floor of what no compaction cuts when it alone
// exceeds the usable window: the head (system prompt, prefaces, pinned messages, standing
// instructions) and the user's newest request.
func (dc *deciding) neverCut() shape {
	var newest int64
	for i, k := range dc.kinds {
		if k == UserRequest {
			newest = dc.sp.rest[i]
		}
	}
	head := dc.sz.head + dc.sp.total
	floor := head + newest
	return shape{head: head, after: floor, reqs: newest, irreducible: floor > dc.pol.usable, neverCut: true}
}

// The user's requests a compaction keeps verbatim after its summary (DISPOSITION_KEEP_REQUEST)
// rather than folding them into it: the newest request always (the user's own newest text is
// never cut), then the task (the first request), then the others newest first, within
// Policy.keep_user_messages_tokens. Requests left out go into the summary.

// keptRequests selects, among reqs (the active requests, oldest first), those before message
// cut that the compaction keeps verbatim: the newest request of the conversation when it is
// before the cut, then the task and the others newest first while their tokens (the newest's
// included) stay within budget (budget < 0: none of them). It calls keep for each (in no
// particular order) and returns their tokens.
func keptRequests(reqs []int32, cut int, tokens []int64, budget int64, keep func(i int)) int64 {
	m := 0
	for m < len(reqs) && int(reqs[m]) < cut {
		m++
	}
	if m == 0 {
		return 0
	}
	var used int64
	add := func(i int) {
		used += tokens[i]
		if keep != nil {
			keep(i)
		}
	}
	newest := -1
	if m == len(reqs) { // the newest request of the conversation is before the cut
		newest = m - 1
		add(int(reqs[newest]))
	}
	if budget < 0 {
		return used
	}
	try := func(k int) {
		if k != newest && used+tokens[reqs[k]] <= budget {
			add(int(reqs[k]))
		}
	}
	try(0)
	for k := m - 1; k >= 1; k-- {
		try(k)
	}
	return used
}

// tailSizes sets tail[k] to the tokens of the active messages from turn start k on, after
// pruning; tail[len(turnStarts)] is 0.
func tailSizes(tail []int64, lay *layout, tokens, saved []int64) {
	k := len(lay.turnStarts)
	tail[k] = 0
	var sum int64
	for i := len(lay.class) - 1; i >= 0; i-- {
		if lay.class[i] == classActive {
			sum += tokens[i] - saved[i]
		}
		for k > 0 && int(lay.turnStarts[k-1]) == i {
			k--
			tail[k] = sum
		}
	}
}

// preferUserTurn returns, among turn k and the later ones up to kMax whose tail is at least
// half as long as k's, the first that a request of the user's starts (UserRequest: not a
// text-protocol agent's tool output, nor a host's blocks alone), if any, else k: a summary
// that ends where the user spoke cuts the conversation at its seams. A tool output does not
// draw the cut past the command it answers (which would summarize the command and keep its
// output); when k is such an output, the cut stays there, before it (keeping the output,
// the summary stating its command), rather than summarizing both.
func (dc *deciding) preferUserTurn(k, kMax int) int {
	if k == kMax {
		return k
	}
	for j := k; j <= kMax; j++ {
		if 2*dc.tail[j] < dc.tail[k] {
			break
		}
		if dc.kinds[dc.lay.turnStarts[j]] == UserRequest {
			return j
		}
	}
	return k
}

// clearAtLeast is the least pruning in place must remove: prune.clear_at_least_tokens when
// set, else the least that pays back the rewrite of the provider's prompt cache within
// PaybackTurns turns. Pruning that removes F tokens rewrites the R tokens from the first
// message it changes to the end: the R − F left are written at price w instead of read at r,
// an extra w(R − F) − rR, and each turn after reads F fewer tokens, saving rF; so it pays back
// within P turns when F ≥ (w − r)R / (w + P·r).
func (dc *deciding) clearAtLeast() int64 {
	pol := &dc.pol
	if pol.clearAtLeast > 0 || len(dc.pr.parts) == 0 {
		return pol.clearAtLeast
	}
	first := len(dc.msgs)
	for _, pp := range dc.pr.parts {
		if dc.pr.saved[pp.Message] > 0 {
			first = min(first, pp.Message)
		}
	}
	var rewritten int64
	for i := first; i < len(dc.msgs); i++ {
		if dc.lay.class[i] != classDrop {
			rewritten += dc.sz.tokens[i]
		}
	}
	w, r := pol.cacheWrite, pol.cacheRead
	return int64(math.Ceil((w - r) * float64(rewritten) / (w + PaybackTurns*r)))
}

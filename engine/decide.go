package engine

import (
	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// The decision of Plan and Decide, in the order the spec gives it, from the measured
// conversation (measure.go) and the policy alone:
//
//  1. under the trigger: nothing (unless forced);
//  2. pruning old tool outputs reaches the target: prune;
//  3. otherwise compact to fit under the trigger: summarize the older turns, keeping the
//     newest ones verbatim (as many as the tail budget allows, at least keep_recent_turns)
//     and the user's requests after the summary. When that does not fit, the shape shrinks
//     step by step, each step only when the previous ones are not enough: the requests
//     other than the newest go into the summary, the summary room shrinks, oversized tool
//     outputs are cut (the protected tail included), and fewer turns are kept (down to one).
//     With too few turns to summarize, pruning and cutting alone are tried first.
//
// What cannot get under the trigger even so is compacted as far as it goes when that fits the
// usable window (the reason says the next turn will compact again), and is irreducible
// otherwise. The response is written by response.go.

// decideMeasured is decide once the conversation is measured (in).
func (c *Counter) decideMeasured(msgs []*compactorv1.Message, pol *policy, opt Options, sc *scratch, in measurement, d *Decision, withPruned bool) error {
	resp := newPlanResponse(len(msgs), pol, in.lay.summary)
	sz := measureSizes(msgs, &in, pol, resp.MessageTokens)
	resp.TokensBefore = sz.before
	*d = Decision{Response: resp}
	var buf [512]byte
	rs := reason(buf[:0]).start(pol, sz.before, opt.Force) // the reason, to be continued
	dc := &deciding{msgs: msgs, pol: pol, opt: opt, sz: sz, d: d, withPruned: withPruned, sc: sc, counter: c}

	if !opt.Force && sz.before <= pol.trigger {
		dc.lay = in.lay
		dc.write(rs.s(": nothing to do"), shape{action: compactorv1.Action_ACTION_NONE, after: sz.before})
		return nil
	}
	// Pruning, over the whole active region. It needs the part counts of messages whose
	// total came from the caller.
	if len(in.lay.results) > 0 && !pol.pruneOff {
		var err error
		if in, err = c.measure(msgs, pol.tokenizer, sc, in, needToolParts); err != nil {
			return err
		}
	}
	dc.lay, dc.counts = in.lay, in.counts
	dc.kinds = userKinds(msgs, &in, sc)
	pr, err := c.measurePruning(msgs, &in, pol, sc, sz.tokens, dc.kinds, withPruned)
	if err != nil {
		return err
	}
	dc.pr = pr
	if dc.tc, err = tokenizer.New(pol.tokenizer); err != nil {
		return err
	}

	turns := len(in.lay.turnStarts)
	if !opt.Force && pr.total > 0 && pr.total >= pol.clearAtLeast && sz.before-pr.total <= pol.target {
		dc.write(rs, shape{action: compactorv1.Action_ACTION_PRUNE, after: sz.before - pr.total, pruned: true, enough: true})
		return nil
	}
	if turns <= pol.keepTurns && sz.before-pr.total <= pol.trigger {
		// Too few turns to summarize, and pruning is enough or nothing is due (forced).
		dc.write(rs, dc.withoutSummary(turns))
		return nil
	}
	sh, err := dc.compact(turns)
	if err != nil {
		return err
	}
	dc.write(rs, sh)
	if sh.action != compactorv1.Action_ACTION_SUMMARIZE {
		return nil
	}
	cut := int(in.lay.turnStarts[sh.k])
	resp.PrefixHash = HexHash(in.prefixHash(c, msgs, cut))
	d.counter, d.msgs = c, msgs
	if in.cv != nil {
		d.keys = in.keys[:cut:cut] // the memoized conversation's: immutable, all valid
	} else {
		d.keys = append([]contentKey(nil), in.keys[:cut]...) // keys is pooled scratch
	}
	return nil
}

// deciding is one decision in progress: the measured conversation, the policy, and the
// response being written. None of its methods counts a message the measurement counted.
type deciding struct {
	msgs       []*compactorv1.Message
	pol        *policy
	opt        Options
	lay        layout
	counts     []msgCount
	sz         sizes
	pr         pruning
	tc         tokenizer.Text
	d          *Decision
	withPruned bool
	sc         *scratch
	counter    *Counter
	reqs       []int32    // the active requests, once summarizing needs them
	tail       []int64    // tail sizes after pruning, per turn start (see tailSizes)
	frame      int64      // the summary message's framing, once summarizing needs it
	kinds      []UserKind // the kind of each active user message (userKinds)
}

// shape is one way to compact the conversation: what stays, and what it costs.
type shape struct {
	action compactorv1.Action
	pruned bool // the prunable tool outputs are pruned
	// For ACTION_SUMMARIZE: the turn the cut is before, the summary room, and the requests
	// kept verbatim (all that fit their budget, or only the newest).
	k        int
	room     int64
	reqs     int64
	optional bool
	// Tool outputs cut (never below MinCutOutputTokens): how much that saves.
	cuts []CutPart
	cut  int64
	// The tokens after: head + summary + requests + tail.
	tail, after int64
	// keep is the number of newest turns the shape keeps at least; few is set when that is
	// every active turn (nothing can be summarized).
	keep int
	few  bool
	// smallest is set on ACTION_NONE when no compaction would make the conversation smaller;
	// enough on ACTION_PRUNE when pruning alone reaches the target.
	smallest, enough bool
}

// withoutSummary is the answer when too few turns are active to summarize (turns ≤
// keep_recent_turns) and the pruned conversation is under the trigger, or the call is forced:
// prune if pruning pays (or the conversation is over the usable window), else nothing.
func (dc *deciding) withoutSummary(turns int) shape {
	pol, sz, prunable := dc.pol, dc.sz, dc.pr.total
	sh := shape{action: compactorv1.Action_ACTION_NONE, after: sz.before, keep: turns, few: true}
	if prunable > 0 && (sz.before > pol.usable || !dc.opt.Force && prunable >= pol.clearAtLeast) {
		sh.action, sh.pruned, sh.after = compactorv1.Action_ACTION_PRUNE, true, sz.before-prunable
	}
	return sh
}

// compact returns the shape that fits under the trigger keeping the most (see the file's
// comment), or, when none does, the smallest one if it fits the usable window; otherwise an
// *IrreducibleError describing the smallest.
func (dc *deciding) compact(turns int) (shape, error) {
	pol := dc.pol
	if err := dc.neverCut(); err != nil {
		return shape{}, err
	}
	var best shape
	for keep := pol.keepTurns; ; keep-- {
		var sh shape
		if turns > keep {
			sh = dc.summarizeShape(turns, keep)
		} else {
			sh = dc.pruneShape(turns)
		}
		if sh.after <= pol.trigger {
			return sh, nil
		}
		if best.action == compactorv1.Action_ACTION_UNSPECIFIED || sh.after < best.after {
			best = sh
		}
		if keep <= 1 || turns < 2 {
			break
		}
	}
	if turns > pol.keepTurns {
		// Keeping every turn, pruned and cut, may cost less than the least summary.
		if sh := dc.pruneShape(turns); sh.after < best.after {
			best = sh
		}
	}
	switch {
	case best.after >= dc.sz.before && dc.sz.before <= pol.usable:
		// Nothing makes it smaller, and it fits as it is.
		return shape{action: compactorv1.Action_ACTION_NONE, after: dc.sz.before, keep: turns, few: turns <= pol.keepTurns, smallest: true}, nil
	case best.after <= pol.usable:
		return best, nil
	}
	return shape{}, dc.irreducible(best)
}

// pruneShape prunes every prunable output of the active region, then cuts oversized tool
// outputs until the conversation fits under the trigger or nothing more can be cut.
func (dc *deciding) pruneShape(turns int) shape {
	sh := shape{action: compactorv1.Action_ACTION_PRUNE, pruned: dc.pr.total > 0, keep: turns, few: turns <= dc.pol.keepTurns}
	sh.tail = dc.sz.active - dc.pr.total
	sh.after = dc.sz.head + dc.sz.summary + sh.tail
	dc.cutOutputs(&sh, dc.lay.summary+1)
	if !sh.pruned && sh.cuts == nil {
		sh.action = compactorv1.Action_ACTION_NONE
	}
	return sh
}

// summarizeShape summarizes the turns before a cut that keeps at least keep turns, shrinking
// the shape step by step until it fits under the trigger (see the file's comment).
func (dc *deciding) summarizeShape(turns, keep int) shape {
	pol, sz := dc.pol, dc.sz
	if dc.tail == nil {
		dc.prepareSummary(turns)
	}
	kMax := turns - keep // the last cut that keeps keep turns; ≥ 1
	sh := shape{action: compactorv1.Action_ACTION_SUMMARIZE, pruned: true, room: max(pol.summaryRoom, dc.minRoom()), optional: true, keep: keep}
	requests := func(k int) int64 {
		return keptRequests(dc.reqs, int(dc.lay.turnStarts[k]), sz.tokens, pol.keepRequests, sh.optional, nil)
	}
	// The cut: the most turns whose tail fits keep_recent_tokens and whose whole fits the
	// target; else the fewest turns allowed.
	sh.k = kMax
	for j := 1; j <= kMax; j++ {
		if dc.tail[j] <= pol.keepTokens && sz.head+requests(j)+sh.room+dc.tail[j] <= pol.target {
			sh.k = preferUserTurn(dc.msgs, &dc.lay, dc.tail, j, kMax)
			break
		}
	}
	total := func() {
		sh.reqs = requests(sh.k)
		sh.tail = dc.tail[sh.k] - sh.cut
		sh.after = sz.head + sh.room + sh.reqs + sh.tail
	}
	total()
	if slack := pol.target - sh.after; slack > 0 && pol.roomGrows {
		// The default room grows into what the target leaves unused, up to twice its size: a
		// longer summary keeps more of what the next turns use.
		sh.room += min(slack, sh.room)
		total()
	}
	if sh.after <= pol.trigger {
		return sh
	}
	// 1. Only the newest request verbatim; the others go into the summary.
	sh.optional = false
	total()
	// 2. A smaller summary room.
	if over := sh.after - pol.trigger; over > 0 {
		sh.room = max(dc.minRoom(), sh.room-over)
		total()
	}
	// 3. Cut oversized tool outputs after the cut; what that frees beyond the need goes back
	// to the summary room, then to the other requests.
	dc.cutOutputs(&sh, int(dc.lay.turnStarts[sh.k]))
	if slack := pol.trigger - sh.after; slack > 0 && sh.cuts != nil {
		sh.room = min(max(pol.summaryRoom, dc.minRoom()), sh.room+slack)
		sh.optional = true
		if total(); sh.after > pol.trigger {
			sh.optional = false
			total()
		}
	}
	return sh
}

// prepareSummary computes what every summarizing shape needs: the tail sizes, the active
// requests and the summary message's framing.
func (dc *deciding) prepareSummary(turns int) {
	dc.sc.tail = resize(dc.sc.tail, turns+1)
	dc.tail = dc.sc.tail
	tailSizes(dc.tail, &dc.lay, dc.sz.tokens, dc.pr.saved)
	dc.sc.reqs = activeRequests(dc.kinds, dc.sc.reqs)
	dc.reqs = dc.sc.reqs
	dc.frame = dc.counter.summaryFrame(dc.pol.tokenizer, dc.tc, len(dc.msgs))
}

// minRoom is the least summary room: the framing and MinSummaryTextTokens of text.
func (dc *deciding) minRoom() int64 { return dc.frame + MinSummaryTextTokens }

// cutOutputs cuts the tool outputs of the active messages from message from on that are not
// pruned (nor requests) until sh fits under the trigger, or as far as cutting goes.
func (dc *deciding) cutOutputs(sh *shape, from int) {
	need := sh.after - dc.pol.trigger
	if need <= 0 {
		return
	}
	var cands []cutCandidate
	pruned := map[[2]int]bool{}
	for _, pp := range dc.pr.parts {
		if !pp.Input && dc.pr.saved[pp.Message] > 0 {
			pruned[[2]int{pp.Message, pp.Part}] = true
		}
	}
	for i := from; i < len(dc.msgs); i++ {
		if dc.lay.class[i] != classActive {
			continue
		}
		m := dc.msgs[i]
		if dc.observation(i) {
			if pruned[[2]int{i, -1}] {
				continue
			}
			if n := dc.counted(i) - MessageOverheadTokens; n > MinCutOutputTokens+cutNoteAllowance {
				cands = append(cands, cutCandidate{msg: i, part: -1, tokens: n})
			}
			continue
		}
		for j, p := range m.GetParts() {
			r := p.GetToolResult()
			if r == nil || pruned[[2]int{i, j}] {
				continue
			}
			if _, ok := outputText(r.GetOutput()); !ok {
				continue
			}
			n := dc.outputTokens(i, j, r)
			if n > MinCutOutputTokens+cutNoteAllowance {
				cands = append(cands, cutCandidate{msg: i, part: j, tokens: n})
			}
		}
	}
	if len(cands) == 0 {
		return
	}
	sh.cuts = chooseCuts(cands, need, dc.tc, func(c cutCandidate) string { return dc.cutSource(c.msg, c.part) })
	var saved int64
	for _, c := range sh.cuts {
		saved += scaleSaving(c.Saved, dc.sz.tokens[c.Message], dc.counted(c.Message))
	}
	sh.cut, sh.tail, sh.after = saved, sh.tail-saved, sh.after-saved
}

// outputTokens is the tokens of the output of the tool result at part j of message i.
func (dc *deciding) outputTokens(i, j int, r *compactorv1.ToolResultPart) int64 {
	if parts := dc.counts[i].parts; parts != nil {
		return int64(parts[j].payload)
	}
	text, _ := outputText(r.GetOutput())
	return dc.tc.Count(text)
}

// counted is the tokenizer's count of message i (the caller's token_count may differ).
func (dc *deciding) counted(i int) int64 {
	if n := dc.counts[i].total; n > 0 {
		return n
	}
	return dc.tc.Message(dc.msgs[i])
}

// cutSource is the text a cut of message i, part j (−1: the observation) shortens.
func (dc *deciding) cutSource(i, j int) string {
	m := dc.msgs[i]
	if j < 0 {
		text, _ := UserText(m)
		return text
	}
	text, _ := outputText(m.GetParts()[j].GetToolResult().GetOutput())
	return text
}

// observation reports whether message i is a tool's output posing as a user turn
// (UserObservation).
func (dc *deciding) observation(i int) bool { return dc.kinds[i] == UserObservation }

// neverCut returns an *IrreducibleError when what no compaction cuts, the head (system
// prompt, prefaces, pinned messages) and the user's newest request, alone exceeds the usable
// window.
func (dc *deciding) neverCut() error {
	pol, sz := dc.pol, dc.sz
	var newest int64
	for i, k := range dc.kinds {
		if k == UserRequest {
			newest = sz.tokens[i]
		}
	}
	floor := sz.head + newest
	if floor <= pol.usable {
		return nil
	}
	excess := floor - pol.usable
	var r reason
	r = r.s(ErrIrreducible.Error()).s(": what no compaction cuts, the head (system prompt, prefaces, pinned messages) ").d(sz.head).
		s(" and the user's newest request ").d(newest).s(", alone ").d(floor).s(" tokens, exceeds the usable window ").d(pol.usable).
		windowParen(pol).s(" by ").d(excess).s(" tokens")
	return &IrreducibleError{Floor: floor, Usable: pol.usable, Excess: excess, NeverCut: true, msg: string(r)}
}

// irreducible is the error for a conversation whose smallest shape sh exceeds the usable
// window.
func (dc *deciding) irreducible(sh shape) error {
	pol, sz := dc.pol, dc.sz
	excess := sh.after - pol.usable
	var r reason
	r = r.s(ErrIrreducible.Error()).s(": ")
	if sh.action == compactorv1.Action_ACTION_SUMMARIZE {
		r = r.s("head ").d(sz.head)
		if sh.reqs > 0 {
			r = r.s(" + newest request ").d(sh.reqs)
		}
		r = r.s(" + least summary ").d(sh.room).
			s(" + last ").d(int64(sh.keep)).s(" turn")
		if sh.keep != 1 {
			r = r.s("s")
		}
		r = r.s(" ").d(sh.tail)
	} else {
		if sh.few {
			r = r.s("nothing can be summarized (")
		} else {
			r = r.s("a summary costs more than it replaces, keeping all (")
		}
		r = r.d(int64(len(dc.lay.turnStarts))).s(" active turns): head ").d(sz.head).
			s(" + latest summary ").d(sz.summary).s(" + active turns ").d(sh.tail)
	}
	r = r.s(" (after pruning")
	if sh.cut > 0 {
		r = r.s(" and cutting tool outputs by ").d(sh.cut)
	}
	r = r.s(") = ").d(sh.after).s(" tokens exceed the usable window ").d(pol.usable).windowParen(pol).
		s(" by ").d(excess).s(" tokens")
	return &IrreducibleError{Floor: sh.after, Usable: pol.usable, Excess: excess, msg: string(r)}
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
// half as long as k's, the first that a user message starts, if any, else k: a summary
// that ends where the user spoke cuts the conversation at its seams.
func preferUserTurn(msgs []*compactorv1.Message, lay *layout, tail []int64, k, kMax int) int {
	if k == kMax {
		return k
	}
	for j := k; j <= kMax; j++ {
		if 2*tail[j] < tail[k] {
			break
		}
		if msgs[lay.turnStarts[j]].GetRole() == compactorv1.Role_ROLE_USER {
			return j
		}
	}
	return k
}

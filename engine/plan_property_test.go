package engine

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// refLinks lists, by brute force, every pair of messages a cut must not separate: a tool call
// and its result, an approval request and its call, an approval request and its response;
// and, as (i, n), pending calls and approvals of the active region.
func refLinks(msgs []*compactorv1.Message) [][2]int {
	n := len(msgs)
	last := LatestSummary(msgs)
	type ref struct {
		id  string
		msg int
	}
	var calls, approvals []ref
	var links [][2]int
	for j, m := range msgs {
		for _, p := range m.GetParts() {
			switch {
			case p.GetToolCall() != nil:
				calls = append(calls, ref{p.GetToolCall().GetToolCallId(), j})
			case p.GetToolResult() != nil:
				for k := len(calls) - 1; k >= 0; k-- {
					if calls[k].id == p.GetToolResult().GetToolCallId() {
						links = append(links, [2]int{calls[k].msg, j})
						calls = append(calls[:k], calls[k+1:]...)
						break
					}
				}
			case p.GetApprovalRequest() != nil:
				for k := len(calls) - 1; k >= 0; k-- {
					if calls[k].id == p.GetApprovalRequest().GetToolCallId() {
						links = append(links, [2]int{calls[k].msg, j})
						break
					}
				}
				approvals = append(approvals, ref{p.GetApprovalRequest().GetApprovalId(), j})
			case p.GetApprovalResponse() != nil:
				for k := len(approvals) - 1; k >= 0; k-- {
					if approvals[k].id == p.GetApprovalResponse().GetApprovalId() {
						links = append(links, [2]int{approvals[k].msg, j})
						approvals = append(approvals[:k], approvals[k+1:]...)
						break
					}
				}
			}
		}
	}
	for _, r := range append(calls, approvals...) {
		if r.msg > last {
			links = append(links, [2]int{r.msg, n})
		}
	}
	return links
}

// refTurnStarts returns, by brute force, the messages a cut may precede: active user or
// assistant messages that no link spans.
func refTurnStarts(msgs []*compactorv1.Message) []int {
	links := refLinks(msgs)
	last := LatestSummary(msgs)
	var starts []int
	for c := last + 1; c < len(msgs); c++ {
		m := msgs[c]
		if InHead(m) || m.GetKind() == compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT {
			continue
		}
		if m.GetRole() != compactorv1.Role_ROLE_USER && m.GetRole() != compactorv1.Role_ROLE_ASSISTANT {
			continue
		}
		ok := true
		for _, l := range links {
			if l[0] < c && c <= l[1] {
				ok = false
				break
			}
		}
		if ok {
			starts = append(starts, c)
		}
	}
	return starts
}

func isActive(msgs []*compactorv1.Message, i int) bool {
	m := msgs[i]
	return i > LatestSummary(msgs) && !InHead(m) && m.GetKind() != compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT
}

// checkInvariants checks what every plan promises, independently of how Decide computes it.
func checkInvariants(t *testing.T, msgs []*compactorv1.Message, p *compactorv1.Policy, d *Decision) {
	t.Helper()
	r := d.Response
	n := len(msgs)
	pol, err := resolved(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Dispositions) != n || len(r.MessageTokens) != n {
		t.Fatalf("%d dispositions, %d token counts for %d messages", len(r.Dispositions), len(r.MessageTokens), n)
	}
	last := LatestSummary(msgs)
	pol.target = refTarget(msgs, r.MessageTokens, pol)
	if int(r.SummaryIndex) != last || r.UsableTokens != pol.usable || r.TriggerAtTokens != pol.trigger || r.TargetTokens != pol.target {
		t.Errorf("summary_index %d usable %d trigger %d target %d; want %d %d %d %d", r.SummaryIndex, r.UsableTokens,
			r.TriggerAtTokens, r.TargetTokens, last, pol.usable, pol.trigger, pol.target)
	}
	var before, head int64
	for i, s := range Sent(msgs) {
		if s {
			before += r.MessageTokens[i]
			if InHead(msgs[i]) {
				head += r.MessageTokens[i]
			}
		}
	}
	// A summary splits the standing instructions from the messages before its cut that mix
	// them with other parts: they join the head, and a request kept verbatim loses them.
	split := refSplits(t, msgs, r.MessageTokens, pol)
	host := refHostParts(t, msgs, r.MessageTokens, pol)
	if r.Action == compactorv1.Action_ACTION_SUMMARIZE {
		for i := 0; i < int(r.CutIndex); i++ {
			head += split[i]
		}
	}
	if r.TokensBefore != before {
		t.Errorf("tokens_before %d, want the sent messages' %d", r.TokensBefore, before)
	}
	pruneParts := map[int]int{}
	for _, pp := range d.Pruned {
		pruneParts[pp.Message]++
		if pp.Part < 0 {
			if kinds := ClassifyUsers(msgs[LatestSummary(msgs)+1:], LatestSummary(msgs) >= 0); kinds[pp.Message-LatestSummary(msgs)-1] != UserObservation {
				t.Errorf("pruned message %d is not an observation", pp.Message)
			}
		} else if part := msgs[pp.Message].GetParts()[pp.Part]; pp.Input && part.GetToolCall() == nil || !pp.Input && part.GetToolResult() == nil {
			t.Errorf("pruned part %+v is not a tool call/result", pp)
		}
		if pol.excluded(pp.Tool) {
			t.Errorf("pruned an output of excluded tool %s", pp.Tool)
		}
		if r.Dispositions[pp.Message] != dPrune {
			t.Errorf("message %d has pruned parts but disposition %v", pp.Message, r.Dispositions[pp.Message])
		}
	}
	cut := int(r.CutIndex)
	cutParts := map[int]int64{}
	for _, c := range d.Cuts {
		cutParts[c.Message] += c.Saved
		if r.Dispositions[c.Message] != dPrune {
			t.Errorf("message %d has a cut output but disposition %v", c.Message, r.Dispositions[c.Message])
		}
		if c.Keep < MinCutOutputTokens || c.Saved <= 0 {
			t.Errorf("cut %+v keeps less than %d tokens or saves nothing", c, MinCutOutputTokens)
		}
		if r.Action == compactorv1.Action_ACTION_SUMMARIZE && c.Message < cut {
			t.Errorf("cut %+v before the cut %d", c, cut)
		}
	}
	isRequest := map[int]bool{}
	var reqs []int // the active requests
	eachUserText(msgs, last+1, last < 0, func(i int, k UserKind) {
		if k == UserRequest && isActive(msgs, i) {
			reqs = append(reqs, i)
			isRequest[i] = true
		}
	})
	var keptReqs int64
	for i, disp := range r.Dispositions {
		m := msgs[i]
		switch {
		case disp == compactorv1.Disposition_DISPOSITION_UNSPECIFIED:
			t.Errorf("message %d: no disposition", i)
		case m.GetKind() == compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT:
			if disp != dDrop {
				t.Errorf("compaction prompt %d: %v, want DROP", i, disp)
			}
		case InHead(m):
			if disp != dKeep {
				t.Errorf("head message %d (system/preface/pinned): %v, want KEEP", i, disp)
			}
		case i < last:
			if disp != dDrop {
				t.Errorf("summarized history %d: %v, want DROP", i, disp)
			}
		case r.Action == compactorv1.Action_ACTION_SUMMARIZE && i < cut:
			switch {
			case disp == dKeepRequest:
				keptReqs += max(r.MessageTokens[i]-host[i], MessageOverheadTokens)
				if split[i] > 0 {
					keptReqs += MessageOverheadTokens - split[i]
				}
				if !isRequest[i] {
					t.Errorf("message %d kept as a request but is not one", i)
				}
			case disp != dSummarize:
				t.Errorf("message %d before the cut %d: %v, want SUMMARIZE or KEEP_REQUEST", i, cut, disp)
			}
		case disp == dPrune:
			if pruneParts[i] == 0 && cutParts[i] == 0 {
				t.Errorf("message %d: PRUNE without pruned or cut parts", i)
			}
		case disp != dKeep:
			t.Errorf("message %d: %v, want KEEP or PRUNE", i, disp)
		}
	}
	// Savings per message (no caller counts in these conversations' pruned messages).
	saved := make([]int64, n)
	for _, pp := range d.Pruned {
		saved[pp.Message] += pp.Saved()
	}
	var pruned int64
	for i := range saved {
		saved[i] = min(saved[i], r.MessageTokens[i]) + cutParts[i]
		pruned += saved[i]
	}
	if r.PrunedTokens != pruned {
		t.Errorf("pruned_tokens %d, parts say %d", r.PrunedTokens, pruned)
	}
	if r.TokensAfter != r.HeadTokens+r.SummaryTokens+r.KeptRequestTokens+r.TailTokens || r.HeadTokens != head {
		t.Errorf("tokens_after %d != head %d (want %d) + summary %d + requests %d + tail %d", r.TokensAfter, r.HeadTokens, head,
			r.SummaryTokens, r.KeptRequestTokens, r.TailTokens)
	}
	compacts := r.Action != compactorv1.Action_ACTION_NONE
	if compacts && r.TokensAfter > pol.usable {
		t.Errorf("%v leaves %d tokens, above usable %d", r.Action, r.TokensAfter, pol.usable)
	}
	// A compaction lands at the target, unless nothing smaller can be kept (checkLeast).
	if compacts && r.TokensAfter > pol.target {
		checkLeast(t, msgs, r, pol, split)
	}
	cached := refCachedPrefix(msgs, r, d)
	if r.CachedPrefixTokens != cached || compacts && r.RewrittenTokens != r.TokensAfter-cached || !compacts && r.RewrittenTokens != 0 {
		t.Errorf("cached prefix %d, rewritten %d; the messages say %d, %d", r.CachedPrefixTokens, r.RewrittenTokens, cached, r.TokensAfter-cached)
	}
	num := func(x int64) string { return strconv.FormatInt(x, 10) }
	quotes := []string{"total " + num(before), "trigger " + num(pol.trigger), "usable " + num(pol.usable)}
	if pol.window > 0 {
		quotes = append(quotes, fmt.Sprintf("window %d − reserve %d", pol.window, pol.reserve))
	}
	switch r.Action {
	case compactorv1.Action_ACTION_NONE, compactorv1.Action_ACTION_PRUNE:
		if cut != -1 || r.PrefixHash != "" || r.KeptRequestTokens != 0 {
			t.Errorf("%v with cut %d, prefix_hash %q, kept requests %d", r.Action, cut, r.PrefixHash, r.KeptRequestTokens)
		}
		if r.TokensAfter != before-pruned {
			t.Errorf("tokens_after %d, want %d − %d", r.TokensAfter, before, pruned)
		}
		if r.Action == compactorv1.Action_ACTION_NONE && before > pol.trigger {
			// Over the trigger, nothing is done only when nothing can be summarized or no
			// compaction makes it smaller.
			checkLeast(t, msgs, r, pol, split)
		}
		if r.Action == compactorv1.Action_ACTION_PRUNE {
			if pruned == 0 {
				t.Errorf("PRUNE removing nothing")
			}
			quotes = append(quotes, num(r.TokensAfter))
		}
		if r.Action == compactorv1.Action_ACTION_NONE && pruned != 0 {
			t.Errorf("NONE with pruned parts")
		}
	case compactorv1.Action_ACTION_SUMMARIZE:
		if cut <= 0 || cut >= n || !isActive(msgs, cut) {
			t.Fatalf("cut %d is not an active message", cut)
		}
		starts := refTurnStarts(msgs)
		tailTurns, k := 0, -1
		for j, s := range starts {
			if s == cut {
				k = j
			}
			if s >= cut {
				tailTurns++
			}
		}
		if k < 1 {
			t.Fatalf("cut %d is not the start of a turn after the first (turn starts %v)", cut, starts)
		}
		if tailTurns != d.TailTurns || tailTurns < 1 {
			t.Errorf("tail keeps %d turns (decision says %d): %s", tailTurns, d.TailTurns, r.Reason)
		}
		// Fewer turns than keep_recent_turns only when keeping them cannot reach the target:
		// a summary keeping them as the target allows (half the summary room, every request,
		// its tail unpruned and uncut) would be over it.
		if tailTurns < pol.keepTurns && len(starts) > pol.keepTurns {
			if u := refTargetSummary(t, msgs, r, pol, split, starts[len(starts)-pol.keepTurns]); u <= pol.target {
				t.Errorf("tail keeps %d turns, fewer than keep_recent_turns %d, but keeping them fits in %d ≤ target %d: %s",
					tailTurns, pol.keepTurns, u, pol.target, r.Reason)
			}
		}
		if r.PrefixHash != HexHash(hashChain(msgs)[cut]) {
			t.Errorf("prefix_hash is not h[cut]")
		}
		tailOf := func(c int) (s int64) {
			for i := c; i < n; i++ {
				if isActive(msgs, i) {
					s += r.MessageTokens[i] - saved[i]
				}
			}
			return s
		}
		tail := tailOf(cut)
		if r.TailTokens != tail || r.KeptRequestTokens != keptReqs {
			t.Errorf("tail_tokens %d, kept_request_tokens %d; the dispositions say %d and %d", r.TailTokens, r.KeptRequestTokens, tail, keptReqs)
		}
		// The tail budget: the verbatim tail (pruned, before cutting) holds more than
		// keep_recent_tokens only when it is down to keep_recent_turns turns or fewer.
		if tail+r.CutTokens > pol.keepTokens && tailTurns > pol.keepTurns {
			t.Errorf("tail of %d turns holds %d tokens, over keep_recent_tokens %d", tailTurns, tail+r.CutTokens, pol.keepTokens)
		}
		// The newest request before the cut, when it is the newest of the conversation, is kept.
		if len(reqs) > 0 {
			newest := reqs[len(reqs)-1]
			if newest < cut && r.Dispositions[newest] != dKeepRequest {
				t.Errorf("the newest request %d is %v", newest, r.Dispositions[newest])
			}
		}
		maxRoom := pol.summaryRoom
		if pol.roomGrows { // the default grows into the target's slack, to twice its size
			maxRoom *= 2
			if r.SummaryTokens > pol.summaryRoom && r.TokensAfter > pol.target {
				t.Errorf("summary room %d grew past the default %d beyond the target %d", r.SummaryTokens, pol.summaryRoom, pol.target)
			}
		}
		if r.SummaryTokens > maxRoom && r.SummaryTokens > SummaryFrameTokens(mustTokenizer(t, pol), n)+MinSummaryTextTokens {
			t.Errorf("summary room %d above %d (summary_max_tokens %d)", r.SummaryTokens, maxRoom, pol.summaryRoom)
		}
		for _, l := range refLinks(msgs) {
			if l[0] < cut && cut <= l[1] {
				t.Errorf("cut %d separates messages %d and %d", cut, l[0], l[1])
			}
		}
		quotes = append(quotes, num(r.TokensAfter), "message "+num(int64(cut)))
		var reach, target int64
		if _, err := fmt.Sscanf(after(r.Reason, "pruning alone reaches "), "%d > target %d", &reach, &target); err == nil {
			if reach <= target || target != pol.target || reach > before {
				t.Errorf("reason claims pruning reaches %d > target %d (target %d, total %d)", reach, target, pol.target, before)
			}
		}
	default:
		t.Errorf("action %v", r.Action)
	}
	for _, q := range quotes {
		if !strings.Contains(r.Reason, q) {
			t.Errorf("reason %q does not quote %q", r.Reason, q)
		}
	}
}

// refTarget returns, by brute force, the target of a plan of msgs (with token counts tokens)
// under pol: with the default target, the one that leaves headroom_turns of the session's
// median turns (an assistant message with the messages up to the next one, over the active
// messages) below the trigger, within its bounds.
func refTarget(msgs []*compactorv1.Message, tokens []int64, pol *policy) int64 {
	if !pol.targetFromTurns {
		return pol.target
	}
	var steps []int64
	cur := int64(-1)
	for i, m := range msgs {
		if !isActive(msgs, i) {
			continue
		}
		if m.GetRole() == compactorv1.Role_ROLE_ASSISTANT {
			if cur >= 0 {
				steps = append(steps, cur)
			}
			cur = 0
		}
		if cur >= 0 {
			cur += tokens[i]
		}
	}
	if cur >= 0 {
		steps = append(steps, cur)
	}
	if len(steps) < MinTurnsForMedian {
		return pol.target
	}
	slices.Sort(steps)
	t := pol.trigger - int64(pol.headroomTurns)*steps[len(steps)/2]
	return min(max(t, int64(math.Floor(DefaultMinTargetRatio*float64(pol.usable)+1e-6))), pol.target, pol.trigger)
}

// refSplits returns, per message, what splitting an active user message that mixes standing
// instructions with other parts puts in the head: its standing parts as a message of their
// own, counted, scaled to the message's token count.
func refSplits(t *testing.T, msgs []*compactorv1.Message, tokens []int64, pol *policy) []int64 {
	out := make([]int64, len(msgs))
	tc := mustTokenizer(t, pol)
	for i, m := range msgs {
		if !isActive(msgs, i) || m.GetRole() != compactorv1.Role_ROLE_USER {
			continue
		}
		standing, rest := SplitInstructions(m)
		if standing == nil || len(rest.GetParts()) == 0 {
			continue
		}
		whole := countMessage(tc, m, maphash.MakeSeed()).total
		parts := countMessage(tc, standing, maphash.MakeSeed()).total - MessageOverheadTokens
		out[i] = min(scaleSaving(parts, tokens[i], whole)+MessageOverheadTokens, tokens[i])
	}
	return out
}

// refHostParts returns, by brute force, the tokens each active user message with words of the
// user's holds in parts of a host's transient text alone (hostPart), which a request kept
// verbatim leaves to the summary (RequestWords), scaled to the message's count as pruning
// scales its savings.
func refHostParts(t *testing.T, msgs []*compactorv1.Message, tokens []int64, pol *policy) []int64 {
	out := make([]int64, len(msgs))
	tc := mustTokenizer(t, pol)
	for i, m := range msgs {
		if !isActive(msgs, i) || m.GetRole() != compactorv1.Role_ROLE_USER || UserWords(m) == "" {
			continue
		}
		var host []*compactorv1.Part
		for _, p := range m.GetParts() {
			if k, _ := textKind(p.GetText().GetText()); p.GetText() != nil && k == partTransient {
				host = append(host, p)
			}
		}
		if len(host) == 0 {
			continue
		}
		whole := countMessage(tc, m, maphash.MakeSeed()).total
		parts := countMessage(tc, withParts(m, host), maphash.MakeSeed()).total - MessageOverheadTokens
		out[i] = scaleSaving(parts, tokens[i], whole)
	}
	return out
}

// refLeastSummary returns, by brute force, what a summary cutting before message cut keeps at
// most when it keeps the least it can: the head (with the standing instructions split from
// the messages before the cut), the least summary room, the user's newest request when it is
// before the cut, and the active messages from the cut on, unpruned and uncut.
func refLeastSummary(t *testing.T, msgs []*compactorv1.Message, r *compactorv1.PlanResponse, pol *policy, split []int64, cut int) int64 {
	u := SummaryFrameTokens(mustTokenizer(t, pol), len(msgs)) + MinSummaryTextTokens
	newest := -1
	eachUserText(msgs, LatestSummary(msgs)+1, LatestSummary(msgs) < 0, func(i int, k UserKind) {
		if k == UserRequest && isActive(msgs, i) {
			newest = i
		}
	})
	for i, sent := range Sent(msgs) {
		switch {
		case !sent:
		case InHead(msgs[i]):
			u += r.MessageTokens[i]
		case !isActive(msgs, i):
		case i >= cut:
			u += r.MessageTokens[i]
		case i == newest:
			u += r.MessageTokens[i] - split[i]
			if split[i] > 0 {
				u += MessageOverheadTokens
			}
			u += split[i]
		default:
			u += split[i]
		}
	}
	return u
}

// checkLeast checks a plan that compacts to more than the target, or does nothing over the
// trigger: no shape could do better with the levers it may use. Toward the target a plan gives
// up turns (the outputs of the tail's older turns, half its summary room) down to the newest
// turn, so a summary keeping the newest turn, half the room and every request before its cut,
// unpruned and uncut (refTargetSummary), would be over the target; toward the trigger it gives
// up everything, so a summary of every turn but the last at its least (refLeastSummary) would
// be over the trigger; and a plan that does nothing could not make the conversation smaller.
func checkLeast(t *testing.T, msgs []*compactorv1.Message, r *compactorv1.PlanResponse, pol *policy, split []int64) {
	t.Helper()
	starts := refTurnStarts(msgs)
	if len(starts) < 2 {
		return // nothing to summarize: only pruning and cutting
	}
	if last := starts[len(starts)-1]; r.TokensAfter > pol.target {
		u := refTargetSummary(t, msgs, r, pol, split, last)
		if u <= pol.target {
			t.Errorf("%v lands at %d > target %d, but a summary keeping the newest turn fits in %d: %s", r.Action, r.TokensAfter, pol.target, u, r.Reason)
		}
		// The reason gives that least, pruned as the summary prunes: over the target, at most
		// the unpruned one.
		if r.Action == compactorv1.Action_ACTION_SUMMARIZE && r.TokensAfter <= pol.trigger {
			var least int64
			if _, err := fmt.Sscanf(after(r.Reason, "half the summary room), "), "%d tokens at least", &least); err != nil {
				t.Errorf("above the target, the reason does not say the least toward it: %s", r.Reason)
			} else if least <= pol.target || least > u {
				t.Errorf("reason's least toward the target %d: want above the target %d, at most %d unpruned: %s", least, pol.target, u, r.Reason)
			}
		}
	}
	u := refLeastSummary(t, msgs, r, pol, split, starts[len(starts)-1])
	if r.TokensAfter > pol.trigger && u <= pol.trigger {
		t.Errorf("%v lands at %d > trigger %d, but a summary of all but the last turn fits in %d: %s", r.Action, r.TokensAfter, pol.trigger, u, r.Reason)
	}
	if r.Action == compactorv1.Action_ACTION_NONE && u < r.TokensBefore {
		t.Errorf("NONE over the trigger, but a summary of all but the last turn keeps %d < %d: %s", u, r.TokensBefore, r.Reason)
	}
}

// refTargetSummary returns, by brute force, what a summary cutting before message cut keeps at
// most toward the target: the head (with the standing instructions split from the messages
// before the cut), half the policy's summary room (at least the least room), every active
// request before the cut (less its standing instructions), and the active messages from the
// cut on, unpruned and uncut.
func refTargetSummary(t *testing.T, msgs []*compactorv1.Message, r *compactorv1.PlanResponse, pol *policy, split []int64, cut int) int64 {
	u := max(pol.summaryRoom/2, SummaryFrameTokens(mustTokenizer(t, pol), len(msgs))+MinSummaryTextTokens)
	isReq := map[int]bool{}
	eachUserText(msgs, LatestSummary(msgs)+1, LatestSummary(msgs) < 0, func(i int, k UserKind) {
		isReq[i] = k == UserRequest
	})
	for i, sent := range Sent(msgs) {
		switch {
		case !sent:
		case InHead(msgs[i]), isActive(msgs, i) && i >= cut:
			u += r.MessageTokens[i]
		case !isActive(msgs, i):
		case isReq[i]:
			u += r.MessageTokens[i] + MessageOverheadTokens
		default:
			u += split[i]
		}
	}
	return u
}

// refCachedPrefix returns, by brute force, the tokens of the sent messages that stay a
// byte-identical prefix of what the plan returns.
func refCachedPrefix(msgs []*compactorv1.Message, r *compactorv1.PlanResponse, d *Decision) int64 {
	changed := map[int]bool{}
	for _, pp := range d.Pruned {
		changed[pp.Message] = true
	}
	for _, c := range d.Cuts {
		changed[c.Message] = true
	}
	var n int64
	for i, sent := range Sent(msgs) {
		if !sent {
			continue
		}
		switch r.Action {
		case compactorv1.Action_ACTION_SUMMARIZE:
			if !InHead(msgs[i]) {
				return n
			}
		case compactorv1.Action_ACTION_PRUNE:
			if changed[i] {
				return n
			}
		}
		n += r.MessageTokens[i]
	}
	return n
}

func mustTokenizer(t *testing.T, pol *policy) tokenizer.Text {
	tc, err := tokenizer.New(pol.tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// checkIrreducible checks an irreducible error against the conversation.
func checkIrreducible(t *testing.T, msgs []*compactorv1.Message, p *compactorv1.Policy, c *Counter, err error) {
	t.Helper()
	var ie *IrreducibleError
	if !errors.As(err, &ie) || !errors.Is(err, ErrIrreducible) {
		t.Fatalf("Decide: %v", err)
	}
	pol, _ := resolved(p)
	if ie.Usable != pol.usable || ie.Excess != ie.Floor-ie.Usable || ie.Excess <= 0 {
		t.Errorf("floor %d usable %d excess %d", ie.Floor, ie.Usable, ie.Excess)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("by %d tokens", ie.Excess)) {
		t.Errorf("error %q does not say by how much", err)
	}
	// The floor is at least what the head costs, and at most what the conversation costs
	// now, or, when a turn can be summarized, the head + the least summary room + the newest
	// request + the last turn, unpruned and uncut.
	big := proto.Clone(p).(*compactorv1.Policy)
	big.ContextWindow, big.TriggerTokens, big.ReserveOutputTokens = 1<<40, 0, 0
	big.KeepRecentTokens, big.SummaryMaxTokens = 0, 0
	r, err := Plan(msgs, big, c)
	if err != nil {
		t.Fatal(err)
	}
	var head, active, summary int64
	for i, s := range Sent(msgs) {
		switch {
		case !s:
		case InHead(msgs[i]):
			head += r.MessageTokens[i]
		case i == LatestSummary(msgs):
			summary += r.MessageTokens[i]
		default:
			active += r.MessageTokens[i]
		}
	}
	// A message mixing standing instructions with other parts splits into two (one more
	// message's overhead), its standing part joining the head.
	split := refSplits(t, msgs, r.MessageTokens, pol)
	var splits int64
	for _, s := range split {
		if s > 0 {
			splits += MessageOverheadTokens
		}
	}
	upper := head + summary + active + splits
	if starts := refTurnStarts(msgs); len(starts) > 1 {
		last := starts[len(starts)-1]
		one := head + SummaryFrameTokens(mustTokenizer(t, pol), len(msgs)) + MinSummaryTextTokens + splits
		for i := range last {
			one += split[i]
		}
		for i := last; i < len(msgs); i++ {
			if isActive(msgs, i) {
				one += r.MessageTokens[i]
			}
		}
		var reqs []int
		eachUserText(msgs, LatestSummary(msgs)+1, LatestSummary(msgs) < 0, func(i int, k UserKind) {
			if k == UserRequest && isActive(msgs, i) {
				reqs = append(reqs, i)
			}
		})
		if n := len(reqs); n > 0 && reqs[n-1] < last {
			one += r.MessageTokens[reqs[n-1]]
		}
		upper = min(upper, one)
	}
	if ie.Floor < head || ie.Floor > upper {
		t.Errorf("floor %d outside [head %d, %d]", ie.Floor, head, upper)
	}
}

var genTools = []string{"read_file", "grep", "bash", "edit"}

// genConversation generates a valid conversation: random mixes of user and assistant turns,
// parallel tool calls answered in one or several messages, provider-executed calls, approvals
// (granted, denied, pending), summaries with their prompts, and system, preface and pinned
// messages anywhere.
func genConversation(r *rand.Rand) []*compactorv1.Message {
	var msgs []*compactorv1.Message
	ids := 0
	newID := func(prefix string) string { ids++; return fmt.Sprint(prefix, ids) }
	txt := func() string {
		n := r.IntN(300)
		if r.IntN(8) == 0 {
			n = r.IntN(3000)
		}
		return plWords(n, strconv.Itoa(r.IntN(1000)))
	}
	input := func() string { return fmt.Sprintf(`{"path":"f%d.go"}`, r.IntN(6)) }
	if r.IntN(3) > 0 {
		msgs = append(msgs, plSysMsg(txt()))
	}
	if r.IntN(4) == 0 {
		m := plUserMsg("env: linux")
		m.Kind = compactorv1.MessageKind_MESSAGE_KIND_SESSION_PREFACE
		msgs = append(msgs, m)
	}
	turns := 1 + r.IntN(40)
	for range turns {
		switch x := r.IntN(24); {
		case x < 5:
			msgs = append(msgs, plUserMsg(txt()))
		case x < 6:
			// A host's text beside the user's words: standing instructions, a reminder, or
			// Claude Code's own summary and a file it read again after it compacted.
			parts := []*compactorv1.Part{plText(txt())}
			switch r.IntN(4) {
			case 0:
				parts = append([]*compactorv1.Part{plText(ccClaudeMd)}, parts...)
			case 1:
				parts = append([]*compactorv1.Part{plText(ccTodo)}, parts...)
			case 2:
				parts = append([]*compactorv1.Part{plText(continuedOpening + " " + txt())}, parts...)
			default:
				parts = append([]*compactorv1.Part{plText(ccClaudeMd + "\n\n" + txt()), plText(continuedOpening + " " + txt()),
					plText(fmt.Sprintf("Result of calling the Read tool: %q", txt()))}, parts...)
			}
			msgs = append(msgs, plMsg(compactorv1.Role_ROLE_USER, parts...))
		case x < 8:
			msgs = append(msgs, plAsstMsg(plText(txt())))
		case x < 15:
			k := 1 + r.IntN(3)
			var parts, results []*compactorv1.Part
			if r.IntN(2) == 0 {
				parts = append(parts, plText(txt()))
			}
			for range k {
				id, tool := newID("call"), genTools[r.IntN(len(genTools))]
				parts = append(parts, plCall(id, tool, input()))
				results = append(results, plResult(id, tool, txt()))
			}
			msgs = append(msgs, plAsstMsg(parts...))
			if r.IntN(5) == 0 { // commentary before the results arrive
				msgs = append(msgs, plAsstMsg(plText("waiting")))
			}
			if r.IntN(2) == 0 {
				msgs = append(msgs, plToolMsg(results...))
			} else {
				for _, res := range results {
					msgs = append(msgs, plToolMsg(res))
				}
			}
		case x < 16:
			id, ap := newID("call"), newID("ap")
			msgs = append(msgs, plAsstMsg(plCall(id, "bash", input()), plApprovalReq(ap, id)))
			ok := r.IntN(3) > 0
			msgs = append(msgs, plToolMsg(plApprovalResp(ap, ok)))
			if ok {
				msgs = append(msgs, plToolMsg(plResult(id, "bash", txt())))
			} else {
				msgs = append(msgs, plToolMsg(&compactorv1.Part{Content: &compactorv1.Part_ToolResult{ToolResult: &compactorv1.ToolResultPart{
					ToolCallId: id, Output: &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Denied{Denied: "no"}}}}}))
			}
		case x < 17:
			id := newID("srv")
			c := plCall(id, "web_search", `{"q":"x"}`)
			c.GetToolCall().ProviderExecuted = true
			msgs = append(msgs, plAsstMsg(c, plResult(id, "web_search", txt()), plText(txt())))
		case x < 18:
			m := plSysMsg(txt())
			m.Lifecycle = compactorv1.Lifecycle_LIFECYCLE_DYNAMIC
			msgs = append(msgs, m)
		case x < 19:
			msgs = append(msgs, plPinned(plUserMsg(txt())))
		case x < 20:
			if r.IntN(2) == 0 {
				msgs = append(msgs, plPromptMsg("summarize the conversation"))
			}
			msgs = append(msgs, plSummaryMsg(txt()))
		default:
			id, tool := newID("call"), genTools[0]
			msgs = append(msgs, plAsstMsg(plCall(id, tool, `{"path":"f0.go"}`)), plToolMsg(plResult(id, tool, txt())))
		}
	}
	switch r.IntN(8) {
	case 0:
		msgs = append(msgs, plAsstMsg(plCall(newID("call"), "bash", input())))
	case 1:
		id := newID("call")
		msgs = append(msgs, plAsstMsg(plCall(id, "bash", input()), plApprovalReq(newID("ap"), id)))
	}
	return msgs
}

// genPolicy picks a policy around the conversation's size so that every action happens.
func genPolicy(r *rand.Rand, total int64) *compactorv1.Policy {
	factors := []float64{0.2, 0.5, 0.8, 1.0, 1.2, 1.6, 3}
	w := max(int64(float64(total)*factors[r.IntN(len(factors))]), 400)
	p := &compactorv1.Policy{ContextWindow: w, Tokenizer: "approx", SummaryMaxTokens: min(1+r.Int64N(2000), w*8/10-1)}
	if r.IntN(3) == 0 {
		p.ReserveOutputTokens = r.Int64N(w / 4)
	}
	usable := w - max(p.ReserveOutputTokens, min(20000, w/10))
	if r.IntN(2) == 0 {
		p.KeepRecentTokens = r.Int64N(usable)
	}
	p.KeepRecentTurns = int32(r.IntN(5))
	if r.IntN(4) == 0 {
		p.TriggerRatio = 0.5 + r.Float64()/2
		p.TargetRatio = p.TriggerRatio * r.Float64()
		if p.TargetRatio == 0 {
			p.TargetRatio = p.TriggerRatio
		}
	}
	if r.IntN(6) == 0 {
		p.TriggerTokens = 1 + r.Int64N(usable)
	}
	if r.IntN(3) == 0 {
		pp := &compactorv1.PrunePolicy{
			Disabled:           r.IntN(6) == 0,
			KeepRecent:         int32(r.IntN(5)),
			MinOutputTokens:    r.Int64N(400),
			ClearInputs:        r.IntN(2) == 0,
			ClearAtLeastTokens: r.Int64N(2000),
		}
		if r.IntN(2) == 0 {
			pp.ExcludeTools = []string{genTools[r.IntN(len(genTools))]}
		}
		p.Prune = pp
	}
	return p
}

func TestPlanPropertiesOnGeneratedConversations(t *testing.T) {
	n := 1500
	if testing.Short() {
		n = 200
	}
	counter := NewCounter(8 << 20)
	actions := map[string]int{}
	for seed := range n {
		r := rand.New(rand.NewPCG(uint64(seed), 42))
		msgs := genConversation(r)
		if err := DefaultLimits().Validate(msgs); err != nil {
			t.Fatalf("seed %d: generator made an invalid conversation: %v", seed, err)
		}
		total := sentTokens(t, counter, msgs, "approx")
		p := genPolicy(r, total)
		if resolvePolicyInto(p, new(policy)) != nil {
			continue
		}
		force := r.IntN(10) == 0
		d, err := Decide(msgs, p, counter, Options{Force: force})
		if err != nil {
			t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { checkIrreducible(t, msgs, p, counter, err) })
			actions["irreducible"]++
			continue
		}
		actions[d.Response.Action.String()]++
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			checkInvariants(t, msgs, p, d)
			// Deterministic: a cold counter and a warm one give the same plan.
			d2, err := Decide(msgs, p, NewCounter(1<<20), Options{Force: force})
			if err != nil || !proto.Equal(d.Response, d2.Response) {
				t.Errorf("cold counter: different plan or error %v", err)
			}
			d3, _ := Decide(msgs, p, counter, Options{Force: force})
			if !proto.Equal(d.Response, d3.Response) || fmt.Sprint(d.Pruned) != fmt.Sprint(d3.Pruned) {
				t.Errorf("second plan differs")
			}
			// PruneAndCut leaves the conversation valid, and Plan's after-count is what the
			// pruned conversation costs when nothing is summarized.
			out := PruneAndCut(msgs, d)
			if err := DefaultLimits().Validate(out); err != nil {
				t.Errorf("pruned conversation invalid: %v", err)
			}
			if d.Response.Action != compactorv1.Action_ACTION_SUMMARIZE {
				// Exactly, unless outputs were cut: their counts are bounds (cutJoinMargin and the
				// rounding of three separate counts each).
				got, after := sentTokens(t, counter, out, "approx"), d.Response.TokensAfter
				if got > after || got < after-int64((cutJoinMargin+2)*len(d.Cuts)) {
					t.Errorf("pruned conversation counts %d, tokens_after %d (%d outputs cut)", got, after, len(d.Cuts))
				}
			}
		})
	}
	t.Logf("actions over %d conversations: %v", n, actions)
	for _, a := range []string{"ACTION_NONE", "ACTION_PRUNE", "ACTION_SUMMARIZE", "irreducible"} {
		if actions[a] == 0 {
			t.Errorf("the generator never produced %s", a)
		}
	}
}

// after returns what follows the first occurrence of sep in s, or "".
func after(s, sep string) string {
	if _, rest, ok := strings.Cut(s, sep); ok {
		return rest
	}
	return ""
}

// TestDecideConcurrentSharedCounter plans many conversations at once with one Counter (run
// with -race): the shared memo and scratch pool give every caller the plan it would get alone.
func TestDecideConcurrentSharedCounter(t *testing.T) {
	type job struct {
		msgs []*compactorv1.Message
		p    *compactorv1.Policy
		want *compactorv1.PlanResponse
	}
	var jobs []job
	for seed := 0; seed < 1000 && len(jobs) < 8; seed++ {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		msgs := genConversation(r)
		total := sentTokens(t, NewCounter(1<<20), msgs, "approx")
		p := genPolicy(r, total)
		if total > 3000 || resolvePolicyInto(p, new(policy)) != nil {
			continue // keep the race-detector run short
		}
		p.Tokenizer = "cl100k_base"
		want, err := Plan(msgs, p, NewCounter(1<<20))
		if err != nil {
			continue
		}
		jobs = append(jobs, job{msgs, p, want})
	}
	shared := NewCounter(64 << 10) // small: evictions happen while planning
	errs := make(chan error, 4*len(jobs))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				j := jobs[(i+g*7)%len(jobs)]
				got, err := Plan(j.msgs, j.p, shared)
				if err != nil || !proto.Equal(got, j.want) {
					errs <- fmt.Errorf("job %d: plan differs from a lone plan (err %v)", (i+g*7)%len(jobs), err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(jobs) < 8 {
		t.Errorf("only %d jobs", len(jobs))
	}
}

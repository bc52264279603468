package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

const (
	dKeep        = compactorv1.Disposition_DISPOSITION_KEEP
	dPrune       = compactorv1.Disposition_DISPOSITION_PRUNE
	dSummarize   = compactorv1.Disposition_DISPOSITION_SUMMARIZE
	dKeepRequest = compactorv1.Disposition_DISPOSITION_KEEP_REQUEST
	dDrop        = compactorv1.Disposition_DISPOSITION_DROP
)

// agentConversation is a system prompt, a user request and rounds of tool calls whose outputs
// are outBytes long, then a final answer.
func agentConversation(rounds, outBytes int) []*compactorv1.Message {
	msgs := []*compactorv1.Message{plSysMsg("you are a coding agent"), plUserMsg("fix the failing test")}
	for i := range rounds {
		id := fmt.Sprint("call", i)
		msgs = append(msgs,
			plAsstMsg(plText("looking"), plCall(id, "read_file", fmt.Sprintf(`{"path":"f%d.go"}`, i))),
			plToolMsg(plResult(id, "", strings.Repeat(string(rune('a'+i%26)), outBytes))))
	}
	return append(msgs, plAsstMsg(plText("done")))
}

// mustDecide plans and checks the invariants every plan has.
func mustDecide(t *testing.T, msgs []*compactorv1.Message, p *compactorv1.Policy, c *Counter, opt Options) *Decision {
	t.Helper()
	if err := DefaultLimits().Validate(msgs); err != nil {
		t.Fatalf("test conversation is invalid: %v", err)
	}
	d, err := Decide(msgs, p, c, opt)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	checkInvariants(t, msgs, p, d)
	return d
}

// total recounts a conversation's sent messages with the counter.
func sentTokens(t *testing.T, c *Counter, msgs []*compactorv1.Message, tokenizer string) int64 {
	t.Helper()
	var n int64
	for i, s := range Sent(msgs) {
		if s {
			k, err := c.Message(msgs[i], tokenizer)
			if err != nil {
				t.Fatal(err)
			}
			n += k
		}
	}
	return n
}

func TestPlanNoneUnderTrigger(t *testing.T) {
	msgs := agentConversation(3, 400)
	d := mustDecide(t, msgs, &compactorv1.Policy{ContextWindow: 128000, Tokenizer: "approx"}, NewCounter(0), Options{})
	r := d.Response
	if r.Action != compactorv1.Action_ACTION_NONE || r.CutIndex != -1 || r.PrefixHash != "" || r.TokensAfter != r.TokensBefore {
		t.Fatalf("plan = %v", r)
	}
	for i, disp := range r.Dispositions {
		if disp != dKeep {
			t.Errorf("message %d: %v, want KEEP", i, disp)
		}
	}
	want := fmt.Sprintf("total %d ≤ trigger 92160 (0.8 × usable 115200 = window 128000 − reserve 12800): nothing to do; %d turns of headroom before the trigger 92160 at the median turn of %d tokens",
		r.TokensBefore, (92160-r.TokensBefore)/r.TurnTokens, r.TurnTokens)
	if r.Reason != want {
		t.Errorf("reason = %q, want %q", r.Reason, want)
	}
}

// usableFor returns a policy whose trigger is just below total and whose target is at least
// after, with a small summary room.
func policyBetween(t *testing.T, total, after int64) *compactorv1.Policy {
	t.Helper()
	u := total*10/8 - 1 // trigger 0.8u < total
	if u*6/10 < after {
		t.Fatalf("cannot place target above %d with trigger below %d", after, total)
	}
	return &compactorv1.Policy{ContextWindow: u + 1000, ReserveOutputTokens: 1000, Tokenizer: "approx", SummaryMaxTokens: 100}
}

func TestPlanPruneOnlyWhenItReachesTheTarget(t *testing.T) {
	msgs := agentConversation(8, 2000) // 8 outputs of 500 tokens
	c := NewCounter(0)
	before := sentTokens(t, c, msgs, "approx")
	// Keep 3: 5 outputs pruned, each 504 tokens → marker.
	p := policyBetween(t, before, before-5*480)
	d := mustDecide(t, msgs, p, c, Options{})
	r := d.Response
	if r.Action != compactorv1.Action_ACTION_PRUNE {
		t.Fatalf("action = %v (%s), want PRUNE", r.Action, r.Reason)
	}
	for i, disp := range r.Dispositions {
		want := dKeep
		if i >= 3 && i <= 11 && i%2 == 1 { // tool messages of rounds 0..4
			want = dPrune
		}
		if disp != want {
			t.Errorf("message %d: %v, want %v", i, disp, want)
		}
	}
	pruned := PruneAndCut(msgs, d)
	if got := sentTokens(t, c, pruned, "approx"); got != r.TokensAfter {
		t.Errorf("pruned conversation counts %d, plan says %d", got, r.TokensAfter)
	}
	if r.PrunedTokens != r.TokensBefore-r.TokensAfter {
		t.Errorf("pruned_tokens %d != before %d − after %d", r.PrunedTokens, r.TokensBefore, r.TokensAfter)
	}
	out := pruned[3].Parts[0].GetToolResult()
	if out.GetToolCallId() != "call0" || out.GetToolName() != "read_file" ||
		out.GetOutput().GetText() != "[pruned: output of tool read_file, 500 tokens removed]" {
		t.Errorf("pruned result = %v", out)
	}
	for _, want := range []string{strconv.FormatInt(r.TokensBefore, 10), strconv.FormatInt(r.TriggerAtTokens, 10),
		strconv.FormatInt(r.PrunedTokens, 10), strconv.FormatInt(r.TokensAfter, 10), strconv.FormatInt(r.TargetTokens, 10),
		"window " + strconv.FormatInt(p.ContextWindow, 10), "reserve 1000", "prune only"} {
		if !strings.Contains(r.Reason, want) {
			t.Errorf("reason %q does not quote %q", r.Reason, want)
		}
	}

	// The same conversation with clear_at_least_tokens above what pruning removes summarizes.
	p2 := proto.Clone(p).(*compactorv1.Policy)
	p2.Prune = &compactorv1.PrunePolicy{ClearAtLeastTokens: r.PrunedTokens + 1}
	d2 := mustDecide(t, msgs, p2, c, Options{})
	if d2.Response.Action == compactorv1.Action_ACTION_PRUNE {
		t.Errorf("pruned %d tokens below clear_at_least_tokens %d", r.PrunedTokens, r.PrunedTokens+1)
	}
	// And with pruning disabled.
	p3 := proto.Clone(p).(*compactorv1.Policy)
	p3.Prune = &compactorv1.PrunePolicy{Disabled: true}
	if d3 := mustDecide(t, msgs, p3, c, Options{}); d3.Response.Action == compactorv1.Action_ACTION_PRUNE || len(d3.Pruned) > 0 {
		t.Errorf("pruned with pruning disabled: %v", d3.Response)
	}
}

func TestPruneDeduplicatesIdenticalCalls(t *testing.T) {
	out := strings.Repeat("x", 1200) // 300 tokens
	msgs := []*compactorv1.Message{
		plUserMsg("go"),
		plAsstMsg(plCall("a", "read_file", `{"path":"a.go"}`)), plToolMsg(plResult("a", "read_file", out)),
		plAsstMsg(plCall("b", "read_file", `{"path":"b.go"}`)), plToolMsg(plResult("b", "read_file", out)),
		plAsstMsg(plCall("c", "read_file", `{"path":"a.go"}`)), plToolMsg(plResult("c", "read_file", out+"y")),
		plAsstMsg(plText("done")),
	}
	c := NewCounter(0)
	pol, err := resolved(&compactorv1.Policy{ContextWindow: 100000, Tokenizer: "approx", Prune: &compactorv1.PrunePolicy{KeepRecent: 10}})
	if err != nil {
		t.Fatal(err)
	}
	lay := analyze(msgs, nil)
	counts, _, _ := countAll(c, msgs, tokenizer.Approx, true)
	got := selectPruneParts(msgs, &lay, counts, pol, &c.counts, tokenizer.Text{}, nil, true)
	if len(got) != 1 || got[0].Message != 2 || !got[0].Duplicate || got[0].Tool != "read_file" {
		t.Fatalf("selectPruneParts = %+v, want only the older a.go output as a duplicate", got)
	}
	if !strings.Contains(got[0].Marker(), "superseded") {
		t.Errorf("marker %q does not say the output was superseded", got[0].Marker())
	}

	// exclude_tools protects even duplicates; clear_inputs replaces the call input with JSON.
	pol.excludeTools = []string{"read_file"}
	if got := selectPruneParts(msgs, &lay, counts, pol, &c.counts, tokenizer.Text{}, nil, true); len(got) != 0 {
		t.Errorf("excluded tool pruned: %+v", got)
	}
	pol.excludeTools = nil
	pol.keepResults = 0
	pol.minOutput = 100
	pol.clearInputs = true
	msgs[1].Parts[0].GetToolCall().InputJson = `{"path":"a.go","content":"` + strings.Repeat("z", 2000) + `"}`
	counts, _, _ = countAll(c, msgs, tokenizer.Approx, true)
	got = selectPruneParts(msgs, &lay, counts, pol, &c.counts, tokenizer.Text{}, nil, true)
	var inputs int
	for _, p := range got {
		if p.Input {
			inputs++
			if p.Message != 1 || !json.Valid([]byte(p.Marker())) {
				t.Errorf("input marker %+v: want message 1 with valid JSON", p)
			}
		}
	}
	if inputs != 1 {
		t.Errorf("cleared %d inputs, want 1 (only the large one saves tokens): %+v", inputs, got)
	}
}

func TestPlanSummarizeCutsAtATurnBoundaryWithinBudget(t *testing.T) {
	var msgs []*compactorv1.Message
	msgs = append(msgs, plSysMsg("system prompt"))
	for i := range 40 {
		msgs = append(msgs, plUserMsg(plWords(100, fmt.Sprint("u", i))))
		msgs = append(msgs, plAsstMsg(plText(plWords(100, fmt.Sprint("a", i)))))
	}
	c := NewCounter(0)
	p := &compactorv1.Policy{ContextWindow: 20000, ReserveOutputTokens: 2000, Tokenizer: "cl100k_base", KeepRecentTokens: 2500, SummaryMaxTokens: 1000,
		KeepUserMessagesTokens: -1} // no request before the cut kept but the newest, which is after it
	d := mustDecide(t, msgs, p, c, Options{})
	r := d.Response
	if r.Action != compactorv1.Action_ACTION_SUMMARIZE {
		t.Fatalf("action = %v: %s", r.Action, r.Reason)
	}
	cut := int(r.CutIndex)
	if msgs[cut].Role != compactorv1.Role_ROLE_USER {
		t.Errorf("cut at %v message, want a user turn", msgs[cut].Role)
	}
	var tail int64
	for i := cut; i < len(msgs); i++ {
		tail += r.MessageTokens[i]
	}
	if tail > 2500 || tail+r.MessageTokens[cut-1]+r.MessageTokens[cut-2] <= 2500 {
		t.Errorf("tail %d tokens from %d: not the longest tail within 2500", tail, cut)
	}
	if r.TokensAfter != r.MessageTokens[0]+1000+tail {
		t.Errorf("tokens_after %d != head %d + summary 1000 + tail %d", r.TokensAfter, r.MessageTokens[0], tail)
	}
	if want := HexHash(hashChain(msgs)[cut]); r.PrefixHash != want {
		t.Errorf("prefix_hash %s, want h[cut] %s", r.PrefixHash, want)
	}
	if d.TailTurns != len(msgs)-cut {
		t.Errorf("TailTurns = %d, want %d", d.TailTurns, len(msgs)-cut)
	}
}

// TestPlanKeepsACommandWithItsOutput: a text-protocol agent (mini-swe-agent) writes its
// command in its text and gets the output as a user message. A summary prefers to end where
// the user spoke, and that output is not the user speaking: when keep_recent_tokens reaches
// back to a command, the cut stays before it rather than moving between it and its output,
// and moves to a request within reach.
func TestPlanKeepsACommandWithItsOutput(t *testing.T) {
	conv := func(request int) []*compactorv1.Message {
		msgs := []*compactorv1.Message{plSysMsg("You are a helpful assistant that can interact with a computer."),
			plUserMsg("Fix the failing date parser in src/dates.py.")}
		for i := range 30 {
			if i == request {
				msgs = append(msgs, plUserMsg("Also keep the old format working: "+plWords(10, "req")))
			}
			msgs = append(msgs, plAsstMsg(plText(fmt.Sprintf("THOUGHT: step %d. %s\n\n```bash\ngrep -n parse src/dates.py | head -%d\n```", i, plWords(60, fmt.Sprint("a", i)), i+1))),
				plUserMsg("<returncode>0</returncode>\n<output>\n"+plWords(120, fmt.Sprint("o", i))+"\n</output>"))
		}
		return msgs
	}
	c := NewCounter(0)
	for _, tt := range []struct {
		request int // the step a request comes before, -1 for none
		command int // the message keep_recent_tokens reaches back to: a command
		want    int // the cut
	}{
		{-1, 50, 50},
		{-1, 40, 40},
		{26, 52, 54}, // the request (message 54) is within reach
	} {
		msgs := conv(tt.request)
		p := &compactorv1.Policy{ContextWindow: 200000, Tokenizer: "cl100k_base", Prune: &compactorv1.PrunePolicy{Disabled: true}}
		tokens := mustDecide(t, msgs, p, c, Options{Force: true}).Response.MessageTokens
		if msgs[tt.command].Role != compactorv1.Role_ROLE_ASSISTANT || tt.request >= 0 && msgs[tt.want].Role != compactorv1.Role_ROLE_USER {
			t.Fatalf("case %+v: the conversation is not what the case says", tt)
		}
		var tail int64
		for _, n := range tokens[tt.command:] {
			tail += n
		}
		p.KeepRecentTokens = tail
		r := mustDecide(t, msgs, p, c, Options{Force: true}).Response
		if int(r.CutIndex) != tt.want {
			t.Errorf("request before step %d, keep_recent_tokens %d (from message %d): cut %d, want %d: %s", tt.request, tail, tt.command, r.CutIndex, tt.want, r.Reason)
		}
	}
}

func TestPlanNeverSplitsToolTurn(t *testing.T) {
	big := strings.Repeat("q", 4000) // 1000 approx tokens
	msgs := []*compactorv1.Message{
		plUserMsg(big),
		plAsstMsg(plText(big)),
		plUserMsg("run both"),
		// An assistant turn whose call is answered only after another assistant message, and
		// parallel calls answered by separate tool messages.
		plAsstMsg(plCall("p1", "grep", `{}`), plCall("p2", "grep", `{}`)),
		plAsstMsg(plText(big)),
		plToolMsg(plResult("p1", "grep", big)),
		plToolMsg(plResult("p2", "grep", big)),
		// An approval flow.
		plAsstMsg(plCall("x", "rm", `{}`), plApprovalReq("ap1", "x")),
		plToolMsg(plApprovalResp("ap1", true)),
		plToolMsg(plResult("x", "rm", "removed")),
		plAsstMsg(plText("done")),
		// A pending approval at the end.
		plUserMsg("now delete the rest"),
		plAsstMsg(plCall("y", "rm", `{}`), plApprovalReq("ap2", "y")),
	}
	lay := analyze(msgs, nil)
	want := []int32{0, 1, 2, 3, 7, 10, 11, 12}
	if fmt.Sprint(lay.turnStarts) != fmt.Sprint(want) {
		t.Errorf("turn starts %v, want %v", lay.turnStarts, want)
	}
	c := NewCounter(0)
	for budget := int64(100); budget <= 6000; budget += 250 {
		for turns := int32(1); turns <= 5; turns++ {
			p := &compactorv1.Policy{ContextWindow: 40000, TriggerTokens: 1000, Tokenizer: "approx", KeepRecentTokens: budget,
				KeepRecentTurns: turns, SummaryMaxTokens: 500, Prune: &compactorv1.PrunePolicy{Disabled: true}}
			d := mustDecide(t, msgs, p, c, Options{})
			if cut := d.Response.CutIndex; cut == 4 || cut == 5 || cut == 6 || cut == 8 || cut == 9 || cut > 12 {
				t.Errorf("budget %d, turns %d: cut %d splits a turn", budget, turns, cut)
			}
		}
	}
}

func TestPlanIrreducibleFloor(t *testing.T) {
	msgs := []*compactorv1.Message{
		plSysMsg(strings.Repeat("s", 32000)), // 8000 approx tokens
		plUserMsg("a"), plAsstMsg(plText("b")), plUserMsg("c"), plAsstMsg(plText("d")),
	}
	p := &compactorv1.Policy{ContextWindow: 8000, ReserveOutputTokens: 800, Tokenizer: "approx", SummaryMaxTokens: 500}
	_, err := Decide(msgs, p, NewCounter(0), Options{})
	var ie *IrreducibleError
	if !errors.Is(err, ErrIrreducible) || !errors.As(err, &ie) {
		t.Fatalf("err = %v, want an IrreducibleError", err)
	}
	// What no compaction cuts, head 8004 + the newest request "c" 5, is over usable 7200.
	if ie.Floor != 8009 || ie.Usable != 7200 || ie.Excess != 809 || !ie.NeverCut {
		t.Errorf("floor %d usable %d excess %d never cut %v, want 8009 7200 809 true", ie.Floor, ie.Usable, ie.Excess, ie.NeverCut)
	}
	if !strings.Contains(err.Error(), "by 809 tokens") || !strings.Contains(err.Error(), "window 8000 − reserve 800") ||
		!strings.Contains(err.Error(), "head (system prompt, prefaces, pinned messages) 8004, the standing instructions 0 and the user's newest request 5") {
		t.Errorf("message %q does not say by how much and against what", err)
	}
	// A head that fits, with short turns: the floor keeps every turn, since the least summary
	// room costs more than the turns it would replace: head 7180 + 5 × 4.
	fits := plSysMsg(strings.Repeat("s", 28704)) // 7180 approx tokens
	short := append([]*compactorv1.Message{fits}, msgs[1:]...)
	p.ReserveOutputTokens = 820 // usable 7180 + 19
	p.ContextWindow = 8019
	if _, err := Decide(short, p, NewCounter(0), Options{}); !errors.As(err, &ie) || ie.NeverCut || ie.Floor != 7200 ||
		!strings.Contains(err.Error(), "a summary costs more than it replaces") {
		t.Errorf("short turns: %v (floor %d)", err, ie.Floor)
	}
	// With long turns, the floor summarizes all but the last two: head 7180 + the least
	// summary room + the turns "c…" and "d…" (keeping only "d…" costs the same: "c…" is the
	// newest request, kept verbatim).
	long := []*compactorv1.Message{fits, plUserMsg(strings.Repeat("a", 4000)), plAsstMsg(plText(strings.Repeat("b", 4000))),
		plUserMsg(strings.Repeat("c", 40)), plAsstMsg(plText(strings.Repeat("d", 40)))}
	_, err = Decide(long, p, NewCounter(0), Options{})
	if !errors.As(err, &ie) || ie.NeverCut {
		t.Fatalf("err = %v, want an IrreducibleError past what is never cut", err)
	}
	tc, _ := tokenizer.New(tokenizer.Approx)
	room := SummaryFrameTokens(tc, len(long)) + MinSummaryTextTokens
	if floor := 7180 + room + 14 + 14; ie.Floor != floor || !strings.Contains(err.Error(), fmt.Sprintf("least summary %d + last 2 turns 28", room)) {
		t.Errorf("floor %d (want %d): %v", ie.Floor, floor, err)
	}
	// Too few turns to summarize and too big: irreducible too.
	_, err = Decide(msgs[:3], p, NewCounter(0), Options{})
	if !errors.Is(err, ErrIrreducible) {
		t.Errorf("two turns over the window: err = %v, want ErrIrreducible", err)
	}
}

func TestPlanRegions(t *testing.T) {
	big := strings.Repeat("w", 2000)
	msgs := []*compactorv1.Message{
		plSysMsg("sys"),                   // 0 head
		plUserMsg("old " + big),           // 1 covered by the summary
		plPinned(plUserMsg("rules")),      // 2 head, before the summary
		plPromptMsg("summarize please"),   // 3 compaction prompt
		plSummaryMsg("summary " + big),    // 4 latest summary
		plUserMsg("q1 " + big),            // 5
		plAsstMsg(plText("a1 " + big)),    // 6
		plPinned(plUserMsg("pin " + big)), // 7 head inside the active region
		plUserMsg("q2 " + big),            // 8
		plAsstMsg(plText("a2 " + big)),    // 9
		plUserMsg("q3"),                   // 10
		plAsstMsg(plText("a3")),           // 11
	}
	c := NewCounter(0)
	p := &compactorv1.Policy{ContextWindow: 10000, TriggerTokens: 2000, Tokenizer: "approx", SummaryMaxTokens: 300, KeepRecentTokens: 400}
	d := mustDecide(t, msgs, p, c, Options{})
	r := d.Response
	// q1 and q2, the user's requests before the cut, stay verbatim after the summary.
	want := []compactorv1.Disposition{dKeep, dDrop, dKeep, dDrop, dSummarize, dKeepRequest, dSummarize, dKeep, dKeepRequest, dSummarize, dKeep, dKeep}
	if r.Action != compactorv1.Action_ACTION_SUMMARIZE || fmt.Sprint(r.Dispositions) != fmt.Sprint(want) {
		t.Errorf("action %v dispositions %v, want SUMMARIZE %v (%s)", r.Action, r.Dispositions, want, r.Reason)
	}
	if r.SummaryIndex != 4 || r.CutIndex != 10 {
		t.Errorf("summary_index %d cut %d, want 4 10", r.SummaryIndex, r.CutIndex)
	}
	// tokens_before excludes what the summary covers and the prompt.
	var sent int64
	for i, s := range Sent(msgs) {
		if s {
			sent += r.MessageTokens[i]
		}
	}
	if r.TokensBefore != sent {
		t.Errorf("tokens_before %d, want %d", r.TokensBefore, sent)
	}
}

func TestPlanForceSummarizesUnderTrigger(t *testing.T) {
	msgs := agentConversation(6, 100)
	p := &compactorv1.Policy{ContextWindow: 200000, Tokenizer: "approx"}
	d := mustDecide(t, msgs, p, NewCounter(0), Options{Force: true})
	if r := d.Response; r.Action != compactorv1.Action_ACTION_SUMMARIZE || !strings.HasPrefix(r.Reason, "forced: ") {
		t.Errorf("forced plan = %v", r)
	}
	// Nothing to summarize: forced is NONE.
	d = mustDecide(t, msgs[:3], p, NewCounter(0), Options{Force: true})
	if r := d.Response; r.Action != compactorv1.Action_ACTION_NONE {
		t.Errorf("forced plan of 1 turn = %v", r)
	}
}

func TestPlanTokenSources(t *testing.T) {
	msgs := agentConversation(3, 400)
	c := NewCounter(0)
	base := mustDecide(t, msgs, &compactorv1.Policy{ContextWindow: 100000, Tokenizer: "approx"}, c, Options{}).Response

	withCount := make([]*compactorv1.Message, len(msgs))
	copy(withCount, msgs)
	m := proto.Clone(msgs[1]).(*compactorv1.Message)
	m.TokenCount = 999
	withCount[1] = m
	r := mustDecide(t, withCount, &compactorv1.Policy{ContextWindow: 100000, Tokenizer: "approx"}, c, Options{}).Response
	if r.MessageTokens[1] != 999 || r.TokensBefore != base.TokensBefore-base.MessageTokens[1]+999 {
		t.Errorf("caller token_count not used: %v", r.MessageTokens)
	}

	// reported_usage replaces the first 4 messages' counts, in proportion, summing exactly.
	p := &compactorv1.Policy{ContextWindow: 100000, Tokenizer: "approx", ReportedUsage: &compactorv1.Usage{InputTokens: 1001, MessageCount: 4}}
	r = mustDecide(t, msgs, p, c, Options{}).Response
	var sum int64
	for i := range 4 {
		sum += r.MessageTokens[i]
	}
	if sum != 1001 {
		t.Errorf("reported prefix sums to %d, want 1001", sum)
	}
	for i := 4; i < len(msgs); i++ {
		if r.MessageTokens[i] != base.MessageTokens[i] {
			t.Errorf("message %d outside the reported prefix changed: %d → %d", i, base.MessageTokens[i], r.MessageTokens[i])
		}
	}
	p.ReportedUsage.MessageCount = int32(len(msgs) + 1)
	var ve *ValidationError
	if _, err := Decide(msgs, p, c, Options{}); !errors.As(err, &ve) || ve.Violations[0].Field != "policy.reported_usage.message_count" {
		t.Errorf("usage beyond the conversation: err = %v", err)
	}
}

func TestPruneAndCutLeavesInputUntouched(t *testing.T) {
	msgs := agentConversation(8, 2000)
	orig := make([]*compactorv1.Message, len(msgs))
	for i, m := range msgs {
		orig[i] = proto.Clone(m).(*compactorv1.Message)
	}
	c := NewCounter(0)
	before := sentTokens(t, c, msgs, "approx")
	p := policyBetween(t, before, before/2)
	p.Prune = &compactorv1.PrunePolicy{ClearInputs: true, KeepRecent: 1, MinOutputTokens: 1}
	d := mustDecide(t, msgs, p, c, Options{})
	out := PruneAndCut(msgs, d)
	for i := range msgs {
		if !proto.Equal(msgs[i], orig[i]) {
			t.Errorf("PruneAndCut modified input message %d", i)
		}
		if d.Response.Dispositions[i] == dKeep && out[i] != msgs[i] {
			t.Errorf("kept message %d was copied", i)
		}
		if d.Response.Dispositions[i] == dPrune && proto.Equal(out[i], msgs[i]) {
			t.Errorf("pruned message %d is unchanged", i)
		}
	}
	if err := DefaultLimits().Validate(out); err != nil {
		t.Errorf("pruned conversation is invalid: %v", err)
	}
}

// TestPreferUserTurn: among the cuts within reach (a tail at least half as long as the first
// that fits), the first before a request; else the first that fits, whatever starts it: a
// tool output neither draws the cut past its command nor is skipped for a later one.
func TestPreferUserTurn(t *testing.T) {
	const (
		A = iota // an assistant message
		R        // a request
		O        // a tool output sent as a user message
		C        // a host's blocks alone
	)
	for _, tt := range []struct {
		name    string
		turns   []int   // what starts each turn
		tail    []int64 // tail per turn start, newest last
		k, want int
	}{
		{"a request within reach", []int{A, O, A, O, R, A}, []int64{60, 50, 40, 35, 30, 10}, 1, 4},
		{"the request out of reach", []int{A, O, A, O, R, A}, []int64{60, 50, 40, 35, 20, 10}, 1, 1},
		{"a command before its output", []int{A, A, O, A, O, A}, []int64{60, 50, 40, 35, 30, 10}, 1, 1},
		{"an output first stays, before its command's summary", []int{A, O, A, O, A, O}, []int64{60, 50, 40, 35, 30, 10}, 1, 1},
		{"a host's reminder is no request", []int{A, O, C, O, R, O}, []int64{60, 50, 40, 35, 30, 10}, 1, 4},
		{"nothing better within reach", []int{A, O, O, O, O, A}, []int64{60, 50, 20, 15, 12, 10}, 1, 1},
		{"k is the last", []int{A, O, A}, []int64{30, 20, 10}, 2, 2},
	} {
		dc := &deciding{}
		for i, kind := range tt.turns {
			role := compactorv1.Role_ROLE_USER
			var k UserKind
			switch kind {
			case A:
				role = compactorv1.Role_ROLE_ASSISTANT
			case R:
				k = UserRequest
			case O:
				k = UserObservation
			case C:
				k = UserContext
			}
			dc.msgs = append(dc.msgs, plMsg(role, plText("x")))
			dc.kinds = append(dc.kinds, k)
			dc.lay.turnStarts = append(dc.lay.turnStarts, int32(i))
		}
		dc.tail = tt.tail
		if got := dc.preferUserTurn(tt.k, len(tt.turns)-1); got != tt.want {
			t.Errorf("%s: turn %d, want %d", tt.name, got, tt.want)
		}
	}
}

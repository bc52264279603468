package engine

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// pruneConversation is a task and n reads, each answered by an output of size words: n−1 of
// them old enough to prune (keep_recent 1), nothing to summarize (keep_recent_turns above n).
func pruneConversation(n, size int) ([]*compactorv1.Message, *compactorv1.Policy) {
	msgs := []*compactorv1.Message{plSysMsg("sys"), plUserMsg("read the files")}
	for i := range n {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs, plAsstMsg(plCall(id, "read", `{"n":"`+id+`"}`)), plToolMsg(plResult(id, "read", plWords(size, id+"w"))))
	}
	return msgs, &compactorv1.Policy{KeepRecentTurns: int32(n + 5), Prune: &compactorv1.PrunePolicy{KeepRecent: 1}}
}

// TestPruneToTarget: when pruning every old output would land far under the target, the
// plan prunes the oldest only, until the conversation is at the target and the cache it
// rewrites pays back (clear_at_least_tokens): the newer outputs stay whole, the one that
// crosses the target is cut when that is enough, the rewrite starts where pruning them all
// would start it, and what PruneAndCut returns counts what the plan said.
func TestPruneToTarget(t *testing.T) {
	counter := NewCounter(1 << 20)
	for _, source := range []string{"", testSource} {
		changedBefore := 0
		// Pruning all 7 old outputs of about 600 tokens would land near 1,300, under a target
		// of 2,700: the target needs about half of them; asked to free 3,500, more go.
		for _, clear := range []int64{1, 3500} {
			msgs, p := pruneConversation(8, 200)
			p.ContextWindow, p.TargetRatio, p.Prune.ClearAtLeastTokens = 6000, 0.5, clear
			d := mustDecide(t, msgs, p, counter, Options{Source: source})
			r := d.Response
			if r.Action != compactorv1.Action_ACTION_PRUNE {
				t.Fatalf("%v, want PRUNE (%s)", r.Action, r.Reason)
			}
			need := max(r.TokensBefore-r.TargetTokens, clear)
			freed := r.TokensBefore - r.TokensAfter
			if r.TokensAfter > r.TargetTokens || freed < need {
				t.Errorf("clear %d: %d → %d frees %d, want at least %d and the target %d (%s)", clear, r.TokensBefore, r.TokensAfter, freed, need, r.TargetTokens, r.Reason)
			}
			// Old outputs are messages 3, 5, …, 15: the pruned ones the oldest, then at most
			// one cut, then the whole ones (at least one when only the target sets need).
			state := map[int]string{}
			for _, pp := range d.Pruned {
				state[pp.Message] = "pruned"
			}
			for _, c := range d.Cuts {
				state[c.Message] = "cut"
			}
			var seq string
			changed := 0
			for i := range 7 {
				switch state[3+2*i] {
				case "pruned":
					seq += "p"
					changed++
				case "cut":
					seq += "c"
					changed++
				default:
					seq += "-"
				}
			}
			want := `^p+c?-+$` // some whole, for the target
			if clear > 1 {
				want = `^p+c?-*$`
			}
			if ok, _ := regexp.MatchString(want, seq); !ok {
				t.Errorf("clear %d: old outputs %s (p pruned, c cut, - whole), want %s: the oldest pruned, at most one cut, then whole ones (%s)", clear, seq, want, r.Reason)
			}
			if changed <= changedBefore {
				t.Errorf("clear %d changes %d old outputs, no more than clear_at_least_tokens 1 did", clear, changed)
			}
			changedBefore = changed
			out := PruneAndCut(msgs, d)
			again, err := Plan(out, p, counter)
			if err != nil {
				t.Fatal(err)
			}
			if again.TokensBefore > r.TokensAfter || again.TokensBefore < r.TokensAfter-(cutJoinMargin+2) {
				t.Errorf("the pruned conversation counts %d, tokens_after %d", again.TokensBefore, r.TokensAfter)
			}
			// Fewer would not do: without what the newest changed output frees, less than
			// need is freed.
			last := 3 + 2*(changed-1)
			if s := r.MessageTokens[last] - again.MessageTokens[last]; freed-s >= need {
				t.Errorf("clear %d: the newest changed output was not needed (freed %d − %d ≥ %d)", clear, freed, s, need)
			}
			// The rewrite starts at the oldest output, as pruning all would.
			var prefix int64
			for _, n := range r.MessageTokens[:3] {
				prefix += n
			}
			if r.CachedPrefixTokens != prefix {
				t.Errorf("cached prefix %d, want the messages before the oldest output, %d", r.CachedPrefixTokens, prefix)
			}
			for i := range 7 {
				if state[3+2*i] == "" && out[3+2*i] != msgs[3+2*i] {
					t.Errorf("old output %d is kept but its message changed", i)
				}
			}
		}
	}
}

// pruneOnlyPolicy is a policy whose trigger is just under before and whose target is about
// before − over: pruning with keep_recent 1 and clear_at_least 1, nothing to summarize.
func pruneOnlyPolicy(before, over int64) *compactorv1.Policy {
	trig := before - 1
	return &compactorv1.Policy{TriggerTokens: trig, TargetRatio: float64(before-over) / float64(trig),
		KeepRecentTurns: 10, Prune: &compactorv1.PrunePolicy{KeepRecent: 1, ClearAtLeastTokens: 1}}
}

// TestPruneToTargetCutsOnlyWhatItWouldPrune: in a tool message answering two parallel calls,
// the older result is prunable and the newer one is the newest result (keep_recent 1): the
// output that crosses the target is the older one, and only it may be cut; the newest, which
// the agent has not read yet, stays whole.
func TestPruneToTargetCutsOnlyWhatItWouldPrune(t *testing.T) {
	counter := NewCounter(1 << 20)
	msgs := []*compactorv1.Message{plSysMsg("sys"), plUserMsg("read both files"),
		plAsstMsg(plCall("a", "read", `{"p":"a"}`), plCall("b", "read", `{"p":"b"}`)),
		plToolMsg(plResult("a", "read", plWords(600, "aa")), plResult("b", "read", plWords(2000, "bb")))}
	p := pruneOnlyPolicy(sentTokens(t, counter, msgs, ""), 300)
	d := mustDecide(t, msgs, p, counter, Options{})
	if len(d.Cuts) != 1 || d.Cuts[0].Message != 3 || d.Cuts[0].Part != 0 {
		t.Errorf("cuts %+v, pruned %+v: want the older result cut, the newest whole (%s)", d.Cuts, d.Pruned, d.Response.Reason)
	}
}

// TestPruneToTargetAtMessageZero: the output crossing the target is in message 0 (a
// provider-executed call and its result open the conversation): the plan counts what it
// prunes and cuts there as PruneAndCut carries it out.
func TestPruneToTargetAtMessageZero(t *testing.T) {
	counter := NewCounter(1 << 20)
	s1 := plCall("s1", "web_search", `{"q":"a"}`)
	s1.GetToolCall().ProviderExecuted = true
	s2 := plCall("s2", "web_search", `{"q":"b"}`)
	s2.GetToolCall().ProviderExecuted = true
	msgs := []*compactorv1.Message{
		plAsstMsg(s1, plResult("s1", "web_search", plWords(600, "aa")), s2, plResult("s2", "web_search", plWords(600, "bb"))),
		plUserMsg("thanks; now compare them"),
		plAsstMsg(plText("they agree")),
	}
	if err := DefaultLimits().Validate(msgs); err != nil {
		t.Fatal(err)
	}
	p := pruneOnlyPolicy(sentTokens(t, counter, msgs, ""), 200)
	d := mustDecide(t, msgs, p, counter, Options{})
	r := d.Response
	if r.Action != compactorv1.Action_ACTION_PRUNE || r.TokensAfter != r.TokensBefore-r.PrunedTokens {
		t.Errorf("%v: tokens_after %d, want %d − %d (%s)", r.Action, r.TokensAfter, r.TokensBefore, r.PrunedTokens, r.Reason)
	}
	checkInvariants(t, msgs, p, d)
	again, err := Plan(PruneAndCut(msgs, d), p, counter)
	if err != nil {
		t.Fatal(err)
	}
	if again.TokensBefore > r.TokensAfter || again.TokensBefore < r.TokensAfter-(cutJoinMargin+2) {
		t.Errorf("the pruned conversation counts %d, tokens_after %d", again.TokensBefore, r.TokensAfter)
	}
}

// TestPruneToTargetReasonWhenOnlyCut: when cutting the oldest prunable output alone frees
// enough, nothing is pruned, and the reason does not say it prunes.
func TestPruneToTargetReasonWhenOnlyCut(t *testing.T) {
	counter := NewCounter(1 << 20)
	msgs, _ := pruneConversation(8, 200)
	p := pruneOnlyPolicy(sentTokens(t, counter, msgs, ""), 100)
	d := mustDecide(t, msgs, p, counter, Options{})
	if len(d.Pruned) != 0 || len(d.Cuts) != 1 {
		t.Fatalf("pruned %+v, cuts %+v: want the oldest output cut alone (%s)", d.Pruned, d.Cuts, d.Response.Reason)
	}
	if strings.Contains(d.Response.Reason, "pruning") {
		t.Errorf("nothing pruned, yet the reason says: %s", d.Response.Reason)
	}
}

// TestPruneToTargetProperties: over generated conversations and policies (caller token
// counts, reported usage, excluded tools, clear_inputs, a provider-executed call opening the
// conversation), a prune-only plan reaches the target and frees clear_at_least, its
// dispositions, pruned parts, caller savings, cached prefix and reason agree, Plan answers
// as Decide did, and PruneAndCut returns a valid conversation counting what it said.
func TestPruneToTargetProperties(t *testing.T) {
	counter := NewCounter(32 << 20)
	stats := map[string]int{}
	for seed := range 3000 {
		prunesToTarget(t, counter, stats, uint64(seed), 99)
	}
	if stats["partial"] == 0 || stats["with cuts"] == 0 {
		t.Errorf("no partial pruning or no cut among the plans: %v", stats)
	}
	t.Logf("%v", stats)
}

func FuzzPruneToTarget(f *testing.F) {
	counter := NewCounter(32 << 20)
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(3342), uint64(99))
	f.Fuzz(func(t *testing.T, a, b uint64) {
		prunesToTarget(t, counter, map[string]int{}, a, b)
	})
}

// prunesToTarget checks the properties TestPruneToTargetProperties states on the conversation
// and policy the seeds generate, counting in stats the plans that prune only, partly, or cut.
func prunesToTarget(t *testing.T, counter *Counter, stats map[string]int, seed, seed2 uint64) {
	r := rand.New(rand.NewPCG(seed, seed2))
	base := genConversation(r)
	if r.IntN(4) == 0 { // message 0 prunable: a provider-executed call and its result
		c := plCall("pe0", "web_search", `{"q":"0"}`)
		c.GetToolCall().ProviderExecuted = true
		parts := []*compactorv1.Part{c, plResult("pe0", "web_search", plWords(100+r.IntN(900), "pe"))}
		if r.IntN(2) == 0 {
			c2 := plCall("pe1", "web_search", `{"q":"1"}`)
			c2.GetToolCall().ProviderExecuted = true
			parts = append(parts, c2, plResult("pe1", "web_search", plWords(100+r.IntN(900), "pf")))
		}
		base = append([]*compactorv1.Message{plAsstMsg(parts...)}, base...)
		if DefaultLimits().Validate(base) != nil {
			return
		}
	}
	conv := make([]*compactorv1.Message, len(base))
	for i, m := range base {
		conv[i] = proto.CloneOf(m)
	}
	p := &compactorv1.Policy{Tokenizer: "approx", KeepRecentTurns: int32(r.IntN(5)),
		Prune: &compactorv1.PrunePolicy{KeepRecent: int32(1 + r.IntN(3)), MinOutputTokens: 1 + r.Int64N(300),
			ClearAtLeastTokens: 1 + r.Int64N(500), ClearInputs: r.IntN(5) == 0}}
	if r.IntN(4) == 0 {
		p.Prune.ExcludeTools = []string{genTools[r.IntN(len(genTools))]}
	}
	switch r.IntN(3) {
	case 1: // the caller's counts on some messages
		for _, m := range conv {
			if r.IntN(2) == 0 {
				k, _ := counter.Message(m, "approx")
				m.TokenCount = max(1, int64(float64(k)*(0.5+r.Float64())))
			}
		}
	case 2: // the provider's usage of a prefix
		mc := 1 + r.IntN(len(conv))
		var s int64
		for i := range mc {
			k, _ := counter.Message(conv[i], "approx")
			s += k
		}
		p.ReportedUsage = &compactorv1.Usage{MessageCount: int32(mc), InputTokens: max(1, int64(float64(s)*(0.5+r.Float64())))}
	}
	probe := proto.CloneOf(p)
	probe.TriggerTokens = 1 << 40
	pr, err := Plan(conv, probe, counter)
	if err != nil || pr.TokensBefore < 10 {
		return
	}
	before := pr.TokensBefore
	p.TriggerTokens = before - 1
	p.TargetRatio = 0.3 + 0.7*r.Float64()
	d, err := Decide(conv, p, counter, Options{})
	if err != nil {
		return
	}
	resp := d.Response
	if resp.Action != compactorv1.Action_ACTION_PRUNE || !strings.Contains(resp.Reason, "prune only") {
		return
	}
	stats["prune only"]++
	partial := strings.Contains(resp.Reason, "the oldest outputs first")
	if partial {
		stats["partial"]++
	}
	if len(d.Cuts) > 0 {
		stats["with cuts"]++
	}
	errorf := func(format string, a ...any) {
		t.Helper()
		t.Errorf("seeds %d, %d: "+format+" (%s)", append(append([]any{seed, seed2}, a...), resp.Reason)...)
	}
	need := max(before-resp.TargetTokens, p.Prune.ClearAtLeastTokens)
	if resp.TokensAfter > resp.TargetTokens || before-resp.TokensAfter < need {
		errorf("%d → %d: target %d, need %d", before, resp.TokensAfter, resp.TargetTokens, need)
	}
	if resp.TokensAfter != before-resp.PrunedTokens {
		errorf("tokens_after %d != before %d − pruned %d", resp.TokensAfter, before, resp.PrunedTokens)
	}
	changed := map[int]bool{}
	outputs := 0
	for _, pp := range d.Pruned {
		changed[pp.Message] = true
		if !pp.Input {
			outputs++
		}
		if resp.Dispositions[pp.Message] != dPrune {
			errorf("pruned part in message %d of disposition %v", pp.Message, resp.Dispositions[pp.Message])
		}
	}
	for _, c := range d.Cuts {
		changed[c.Message] = true
	}
	first := len(conv)
	for i, disp := range resp.Dispositions {
		if disp == dPrune {
			first = min(first, i)
			if !changed[i] {
				errorf("message %d PRUNE without pruned or cut parts", i)
			}
		}
	}
	var prefix int64
	for i, s := range Sent(conv) {
		if s && i < first {
			prefix += resp.MessageTokens[i]
		}
	}
	if resp.CachedPrefixTokens != prefix {
		errorf("cached prefix %d, want %d", resp.CachedPrefixTokens, prefix)
	}
	if x := 0; partial && strings.Contains(resp.Reason, "; pruning ") {
		fmt.Sscanf(strings.TrimPrefix(after(resp.Reason, "; pruning "), "the oldest "), "%d", &x)
		if x != outputs {
			errorf("the reason says %d outputs pruned, the decision prunes %d", x, outputs)
		}
	}
	if d.saved != nil {
		var s int64
		for _, v := range d.saved {
			s += v
		}
		if s != resp.PrunedTokens {
			errorf("caller savings sum %d, pruned_tokens %d", s, resp.PrunedTokens)
		}
	}
	if pl, err := Plan(conv, p, counter); err != nil || !proto.Equal(pl, resp) {
		errorf("Plan differs from Decide: %v\n%v\n%v", err, pl, resp)
	}
	out := PruneAndCut(conv, d)
	if err := DefaultLimits().Validate(out); err != nil {
		errorf("invalid result: %v", err)
	}
	p2 := proto.CloneOf(probe)
	p2.ReportedUsage = nil
	again, err := Plan(out, p2, counter)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := again.TokensBefore, resp.TokensAfter; got > want || got < want-int64((cutJoinMargin+2)*len(d.Cuts)) {
		errorf("re-planned %d, tokens_after %d (%d cuts)", got, want, len(d.Cuts))
	}
}

// TestPruneToTargetPrunesSuperseded: an output a newer identical call superseded is pruned
// even when it is newer than the outputs pruning to the target spares; the spared ones stay
// whole, and the rewrite still starts at the oldest output.
func TestPruneToTargetPrunesSuperseded(t *testing.T) {
	counter := NewCounter(1 << 20)
	msgs, p := pruneConversation(8, 200)
	// The sixth read (message 12, its output message 13) asks what the eighth does.
	msgs[12] = plAsstMsg(plCall("c5", "read", `{"n":"c7"}`))
	p.ContextWindow, p.TargetRatio, p.Prune.ClearAtLeastTokens = 6000, 0.5, 1
	d := mustDecide(t, msgs, p, counter, Options{})
	pruned := map[int]bool{}
	for _, pp := range d.Pruned {
		pruned[pp.Message] = true
	}
	if !pruned[13] || !pruned[3] || pruned[11] {
		t.Errorf("pruned %v: want the oldest and the superseded (13) pruned, 11 spared (%s)", pruned, d.Response.Reason)
	}
	if !strings.Contains(d.Response.Reason, "1 newer that a later identical call superseded") {
		t.Errorf("the reason does not say so: %s", d.Response.Reason)
	}
	r := d.Response
	var prefix int64
	for _, n := range r.MessageTokens[:3] {
		prefix += n
	}
	if r.TokensAfter > r.TargetTokens || r.CachedPrefixTokens != prefix {
		t.Errorf("tokens_after %d (target %d), cached prefix %d (want %d)", r.TokensAfter, r.TargetTokens, r.CachedPrefixTokens, prefix)
	}
}

// TestNoPruningReportsNone: a plan that prunes nothing (pruning would free less than
// clear_at_least_tokens asks, and there is nothing to summarize) reports no pruned tokens.
func TestNoPruningReportsNone(t *testing.T) {
	msgs, p := pruneConversation(8, 200)
	p.ContextWindow, p.Prune.ClearAtLeastTokens = 6000, 100000
	r, err := Plan(msgs, p, NewCounter(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if r.Action != compactorv1.Action_ACTION_NONE || r.PrunedTokens != 0 || r.TokensAfter != r.TokensBefore {
		t.Errorf("%v: pruned_tokens %d, %d → %d, want NONE pruning nothing (%s)", r.Action, r.PrunedTokens, r.TokensBefore, r.TokensAfter, r.Reason)
	}
}

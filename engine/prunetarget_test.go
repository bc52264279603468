package engine

import (
	"fmt"
	"regexp"
	"testing"

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

package engine

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/cputime"
)

// TestCallerCountsCostNoRecount plans a growing text-protocol agent conversation (its tool
// output arrives as user messages) with and without the caller's token_count on every
// message, each plan with a new newest message so that no plan is recalled whole. With the
// caller's counts a plan must cost about what it costs without them: the observations'
// counts come from the memo like every other message's. Re-tokenizing every observation
// on every plan that acts made it 25× (1,438 against 49 µs a plan); the least of three
// runs of each kind is compared, so a busy machine inflates both alike.
func TestCallerCountsCostNoRecount(t *testing.T) {
	var msgs []*compactorv1.Message
	for _, f := range corpus.Files(t) {
		if strings.Contains(f.Name, "pytest-dev__pytest-6197") {
			msgs = readCorpusFile(t, f)
		}
	}
	if len(msgs) == 0 {
		t.Fatal("the corpus lacks minisweagent-gemini3-pytest-dev__pytest-6197")
	}
	c := NewCounter(0)
	whole, err := Plan(msgs, &compactorv1.Policy{ContextWindow: 1 << 30}, c)
	if err != nil {
		t.Fatal(err)
	}
	counted := make([]*compactorv1.Message, len(msgs))
	for i, m := range msgs {
		counted[i] = proto.CloneOf(m)
		counted[i].TokenCount = whole.GetMessageTokens()[i]
	}
	policy := &compactorv1.Policy{ContextWindow: whole.GetTokensBefore() / 2}
	run := 0
	plans := func(conv []*compactorv1.Message, caller bool) time.Duration {
		run++
		start := cputime.Process()
		for k := len(conv) / 2; k < len(conv); k++ {
			newest := &compactorv1.Message{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{
				Text: &compactorv1.TextPart{Text: fmt.Sprintf("<returncode>0</returncode>\n<output>run %d, step %d</output>", run, k)}}}}}
			if caller {
				newest.TokenCount = 20
			}
			p, err := Plan(append(conv[:k:k], newest), policy, c)
			if err != nil {
				t.Fatal(err)
			}
			if p.GetAction() == compactorv1.Action_ACTION_NONE && k == len(conv)-1 {
				t.Fatalf("the newest plan does nothing (%s): the test needs plans that act", p.GetReason())
			}
		}
		return cputime.Process() - start
	}
	least := func(conv []*compactorv1.Message, caller bool) time.Duration {
		best := time.Duration(math.MaxInt64)
		for range 3 {
			best = min(best, plans(conv, caller))
		}
		return best
	}
	ours, callers := least(msgs, false), least(counted, true)
	if ours == 0 {
		t.Skip("no process CPU time on this platform")
	}
	ratio := float64(callers) / float64(ours)
	t.Logf("%d plans: %v with compactord's counts, %v with the caller's: %.1f×", len(msgs)-len(msgs)/2, ours, callers, ratio)
	if ratio > 4 {
		t.Errorf("plans with the caller's counts cost %.1f× those without (%v against %v): observations are counted again", ratio, callers, ours)
	}
}

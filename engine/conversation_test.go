package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// decoded returns a copy of msgs as a request decoder would make it: no message, part or
// string shared with msgs.
func decoded(t testing.TB, msgs []*compactorv1.Message) []*compactorv1.Message {
	t.Helper()
	return decodedCopies(t, msgs, 1)[0]
}

// lookup counts msgs for a plan under tokenizer id and returns the memoized conversation
// it used, or nil when it counted in scratch memory (the memo did not hold msgs).
func lookup(t testing.TB, c *Counter, msgs []*compactorv1.Message, id tokenizer.ID) *conversation {
	t.Helper()
	in, err := measure(c, msgs, id, new(scratch), measurement{}, needUncounted)
	if err != nil {
		t.Fatal(err)
	}
	return in.cv
}

// stored returns what the conversation memo holds for msgs under id: nil and false when
// nothing, nil and true when it saw msgs once.
func stored(c *Counter, msgs []*compactorv1.Message, id tokenizer.ID) (*conversation, bool) {
	k := c.keys.conversation(msgs, make([]contentKey, len(msgs)), id)
	return c.convs.memo.get(k.shard(), k)
}

// equalDecisions reports how two decisions differ: response, pruned parts, prefix chain.
func equalDecisions(a, b *Decision) error {
	if !proto.Equal(a.Response, b.Response) {
		return fmt.Errorf("responses differ:\n%v\n%v", a.Response, b.Response)
	}
	if fmt.Sprint(a.Pruned) != fmt.Sprint(b.Pruned) || a.TailTurns != b.TailTurns {
		return fmt.Errorf("pruned parts or tail turns differ")
	}
	if !slices.Equal(a.PrefixChain(), b.PrefixChain()) {
		return fmt.Errorf("prefix chains differ")
	}
	return nil
}

// TestConversationMemoMatchesPlansWithout plans generated conversations under the o200k
// tokenizer, with caller token counts on none, some or all messages, several times each
// with one Counter (later plans of a content come from the conversation memo, some of them
// needing counts an earlier plan did not) and compares every plan with one made without the
// conversation memo.
func TestConversationMemoMatchesPlansWithout(t *testing.T) {
	n := 50
	if testing.Short() {
		n = 15
	}
	warm := NewCounter(32 << 20)
	// The same Counter but for a conversation memo that stores nothing.
	without := &Counter{keys: warm.keys, counts: warm.counts, chain: warm.chain,
		convs: convMemo{newMemoShards[convKey, *conversation](0, convShards)}}
	hits := 0
	for seed := range n {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		msgs := genConversation(r)
		total := sentTokens(t, warm, msgs, "")
		for round := range 4 {
			conv := decoded(t, msgs)
			switch r.IntN(3) { // caller counts on no, some or every message
			case 1:
				for _, m := range conv {
					if r.IntN(2) == 0 {
						m.TokenCount = 1 + r.Int64N(500)
					}
				}
			case 2:
				for _, m := range conv {
					m.TokenCount = 1 + r.Int64N(500)
				}
			}
			p := genPolicy(r, total)
			p.Tokenizer = ""
			if resolvePolicyInto(p, new(policy)) != nil {
				continue
			}
			opt := Options{Force: r.IntN(8) == 0}
			before, _ := warm.convs.memo.stats()
			d, err := Decide(conv, p, warm, opt)
			cold, coldErr := Decide(conv, p, without, opt)
			if (err == nil) != (coldErr == nil) || err != nil && err.Error() != coldErr.Error() {
				t.Fatalf("seed %d round %d: error %v, cold %v", seed, round, err, coldErr)
			}
			if err != nil {
				continue
			}
			if err := equalDecisions(d, cold); err != nil {
				t.Fatalf("seed %d round %d: %v", seed, round, err)
			}
			if after, _ := warm.convs.memo.stats(); after == before && round > 0 {
				hits++
			}
		}
	}
	if hits == 0 {
		t.Fatal("no plan came from the conversation memo: the test checked nothing")
	}
	if n, _ := without.convs.memo.stats(); n != 0 {
		t.Fatalf("the reference Counter memoized %d conversations", n)
	}
}

// TestConversationMemoHitsOnlySameContent: the memo records a conversation the first time
// it is planned and stores it the second; from the third on a decoded copy, or one that
// differs only in ids, is the memoized conversation itself. One that differs in one byte of
// one string, a role, an unknown field or its length is another, with the right counts.
func TestConversationMemoHitsOnlySameContent(t *testing.T) {
	c := NewCounter(8 << 20)
	base := conversation200()[:60]
	for i, want := range []bool{false, false, true} {
		if cv := lookup(t, c, decoded(t, base), tokenizer.O200k); (cv != nil) != want {
			t.Fatalf("plan %d: memoized = %v, want %v", i+1, cv != nil, want)
		}
		if cv, seen := stored(c, base, tokenizer.O200k); !seen || (cv != nil) != (i > 0) {
			t.Fatalf("after plan %d: the memo holds %v, %v", i+1, cv != nil, seen)
		}
	}
	first, _ := stored(c, base, tokenizer.O200k)
	if n, _ := c.convs.memo.stats(); n != 1 {
		t.Fatalf("memo holds %d conversations, want 1", n)
	}
	again := decoded(t, base)
	for i, m := range again {
		m.Id = fmt.Sprint("id-", i)
	}
	if lookup(t, c, again, tokenizer.O200k) != first {
		t.Errorf("a decoded copy with other ids is not the memoized conversation")
	}
	msgCounts, _ := c.counts.memo.stats()

	tests := []struct {
		name   string
		change func(msgs []*compactorv1.Message) []*compactorv1.Message
	}{
		{"one byte of one string", func(msgs []*compactorv1.Message) []*compactorv1.Message {
			r := msgs[30].Parts[0].GetToolResult().GetOutput()
			text := []byte(r.GetText())
			text[len(text)/2] ^= 1
			r.Value = &compactorv1.ToolOutput_Text{Text: string(text)}
			return msgs
		}},
		{"a role", func(msgs []*compactorv1.Message) []*compactorv1.Message {
			msgs[11].Role = compactorv1.Role_ROLE_USER
			return msgs
		}},
		{"an unknown field", func(msgs []*compactorv1.Message) []*compactorv1.Message {
			msgs[20].Parts[0].GetText().ProtoReflect().SetUnknown(unknown127(1))
			return msgs
		}},
		{"one message fewer", func(msgs []*compactorv1.Message) []*compactorv1.Message { return msgs[:len(msgs)-1] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := tt.change(decoded(t, base))
			if lookup(t, c, msgs, tokenizer.O200k) != nil {
				t.Fatalf("a different conversation is memoized")
			}
			lookup(t, c, decoded(t, msgs), tokenizer.O200k)
			cv := lookup(t, c, decoded(t, msgs), tokenizer.O200k)
			if cv == nil || cv == first || cv.key == first.key {
				t.Fatalf("the conversation is not memoized on its own")
			}
			want, _, err := countAll(NewCounter(1<<20), msgs, tokenizer.O200k, true)
			if err != nil {
				t.Fatal(err)
			}
			for i := range msgs {
				if cv.counts[i].total != want[i].total {
					t.Errorf("message %d: count %d, want %d", i, cv.counts[i].total, want[i].total)
				}
			}
		})
	}
	if n, _ := c.counts.memo.stats(); n > msgCounts+len(tests) {
		t.Errorf("message memo grew from %d to %d entries: more than the changed messages were counted", msgCounts, n)
	}
	if lookup(t, c, decoded(t, base), tokenizer.O200k) != first {
		t.Errorf("the first conversation is no longer memoized")
	}
}

// TestConversationMemoTokenCounts: token_count is not part of the content, so conversations
// that differ only there share a memoized conversation, which counts the messages some plan
// needed: a message whose count the caller gave is counted only once a plan needs it.
func TestConversationMemoTokenCounts(t *testing.T) {
	c := NewCounter(8 << 20)
	base := conversation200()[:60]
	cold, _, err := countAll(NewCounter(1<<20), base, tokenizer.O200k, true)
	if err != nil {
		t.Fatal(err)
	}
	withCounts := decoded(t, base)
	for i, m := range withCounts {
		if i%2 == 0 {
			m.TokenCount = 1000 + int64(i)
		}
	}
	p := &compactorv1.Policy{ContextWindow: 1 << 20, Prune: &compactorv1.PrunePolicy{Disabled: true}}
	var d *Decision
	for range 3 { // the first plan records the conversation, the second stores it
		d = mustDecide(t, decoded(t, withCounts), p, c, Options{})
	}
	for i, m := range withCounts {
		want := cold[i].total
		if m.TokenCount > 0 {
			want = m.TokenCount
		}
		if got := d.Response.MessageTokens[i]; got != want {
			t.Errorf("message %d: %d tokens, want %d", i, got, want)
		}
	}
	cv, _ := stored(c, withCounts, tokenizer.O200k)
	if cv == nil {
		t.Fatal("the conversation is not memoized")
	}
	for i, m := range withCounts {
		if counted := cv.counts[i].total > 0; counted != (m.TokenCount <= 0) {
			t.Errorf("message %d (token_count %d): counted = %v", i, m.TokenCount, counted)
		}
	}

	// The same content without caller counts: the missing counts are added, in a new
	// conversation that replaces the old one.
	d = mustDecide(t, decoded(t, base), p, c, Options{})
	for i := range base {
		if got := d.Response.MessageTokens[i]; got != cold[i].total {
			t.Errorf("without token counts, message %d: %d tokens, want %d", i, got, cold[i].total)
		}
	}
	full, _ := stored(c, base, tokenizer.O200k)
	if full == nil || full == cv || full.key != cv.key {
		t.Errorf("the extended conversation is not a new one under the same key")
	}
	if n, _ := c.convs.memo.stats(); n != 1 {
		t.Errorf("memo holds %d conversations, want 1", n)
	}
	for i := range base {
		if cv.counts[i].total > 0 && cv.counts[i].total != full.counts[i].total || full.counts[i].total != cold[i].total {
			t.Errorf("message %d: counts %d then %d, want %d", i, cv.counts[i].total, full.counts[i].total, cold[i].total)
		}
	}
	if cv.counts[0].total != 0 {
		t.Errorf("extending a conversation wrote into the old one")
	}
}

// TestConversationNeverModified snapshots a memoized conversation and plans its content
// under policies that take every path of Decide (prune with clear_inputs, summarize, a
// reported usage, force): the conversation stays as it was.
func TestConversationNeverModified(t *testing.T) {
	c := NewCounter(8 << 20)
	base := conversation200()
	for range 2 {
		mustDecide(t, decoded(t, base), &compactorv1.Policy{ContextWindow: 1 << 20}, c, Options{})
	}
	cv, _ := stored(c, base, tokenizer.O200k)
	if cv == nil {
		t.Fatal("the conversation is not memoized")
	}
	type snapshot struct {
		counts []msgCount
		parts  [][]partCount
		keys   []contentKey
		lay    layout
	}
	take := func() snapshot {
		s := snapshot{counts: slices.Clone(cv.counts), keys: slices.Clone(cv.keys), lay: layout{
			summary: cv.lay.summary, class: slices.Clone(cv.lay.class),
			turnStarts: slices.Clone(cv.lay.turnStarts), results: slices.Clone(cv.lay.results)}}
		for _, mc := range cv.counts {
			s.parts = append(s.parts, slices.Clone(mc.parts))
		}
		return s
	}
	want := take()
	for _, p := range []*compactorv1.Policy{
		{ContextWindow: 40000},
		{ContextWindow: 40000, Prune: &compactorv1.PrunePolicy{ClearInputs: true, KeepRecent: 1, MinOutputTokens: 1}},
		{ContextWindow: 16000},
		{ContextWindow: 16000, ReportedUsage: &compactorv1.Usage{InputTokens: 9000, MessageCount: 150}},
	} {
		for _, force := range []bool{false, true} {
			if _, err := Decide(decoded(t, base), p, c, Options{Force: force}); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := take()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("planning modified the memoized conversation")
	}
}

// TestConversationMemoStaysWithinBudget plans many distinct conversations with a small
// Counter: the conversation memo keeps to its quarter of the budget, and a conversation
// larger than a shard is planned without being memoized.
func TestConversationMemoStaysWithinBudget(t *testing.T) {
	const budget = 1 << 20
	c := NewCounter(budget)
	p := &compactorv1.Policy{ContextWindow: 1 << 20, Tokenizer: "cl100k_base"}
	const n = 1000
	for i := range n {
		msgs := []*compactorv1.Message{plSysMsg("be brief"), plUserMsg(fmt.Sprint("question ", i)), plAsstMsg(plText("answer"))}
		mustDecide(t, msgs, p, c, Options{})
		mustDecide(t, msgs, p, c, Options{})
	}
	entries, used := c.convs.memo.stats()
	if used > budget/4 || entries == 0 || entries == n {
		t.Errorf("%d conversations charged %d bytes; want some evicted, within %d", entries, used, budget/4)
	}
	big := conversation200()
	big = append(big, big...)
	big = append(big, big...) // 800 messages: about 75 kB, more than a shard's 64 kB
	var d *Decision
	for range 3 {
		d = mustDecide(t, big, p, c, Options{})
	}
	if cv, _ := stored(c, big, tokenizer.Cl100k); cv != nil {
		t.Errorf("a conversation larger than a shard is memoized")
	}
	if after, used := c.convs.memo.stats(); used > budget/4 || after > entries+1 {
		t.Errorf("after a large conversation: %d conversations, %d bytes", after, used)
	}
	if d2 := mustDecide(t, decoded(t, big), p, NewCounter(0), Options{}); !proto.Equal(d.Response, d2.Response) {
		t.Errorf("the unmemoized plan differs")
	}
}

// TestConversationMemoSize reports what a 200-message conversation is charged.
func TestConversationMemoSize(t *testing.T) {
	c := NewCounter(0)
	msgs := conversation200()
	lookup(t, c, msgs, tokenizer.O200k)
	lookup(t, c, msgs, tokenizer.O200k)
	cv, _ := stored(c, msgs, tokenizer.O200k)
	if cv == nil {
		t.Fatal("the conversation is not memoized")
	}
	t.Logf("a %d-message conversation is charged %d bytes (%d per message)", len(msgs), cv.size, cv.size/int64(len(msgs)))
	if per := cv.size / int64(len(msgs)); per > 150 {
		t.Errorf("%d bytes per message", per)
	}
}

// TestConversationMemoConcurrentUse plans overlapping conversations from several goroutines
// with a Counter small enough to evict, and checks every plan against one made alone.
func TestConversationMemoConcurrentUse(t *testing.T) {
	base := conversation200()
	p := &compactorv1.Policy{ContextWindow: 16000}
	want := map[int]*compactorv1.PlanResponse{}
	ref := NewCounter(0)
	lengths := []int{60, 61, 100, 150, 199, 200}
	for _, n := range lengths {
		r, err := Plan(base[:n], p, ref)
		if err != nil {
			t.Fatal(err)
		}
		want[n] = r
	}
	c := NewCounter(512 << 10)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		copies := decodedCopies(t, base, 2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				n := lengths[(g+i)%len(lengths)]
				r, err := Plan(copies[i%2][:n], p, c)
				if err != nil {
					errs <- err
					return
				}
				if !proto.Equal(r, want[n]) {
					errs <- fmt.Errorf("goroutine %d, %d messages: plan differs", g, n)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

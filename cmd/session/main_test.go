package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/measure"
	"google.golang.org/protobuf/proto"
)

// TestReplay replays a Claude Code session (which gets the CLAUDE.md block) and a SWE-agent
// one at a window that makes both compact, and checks the mechanics: where the block goes,
// that the requests are the user's own words, and that every compaction is recorded with
// the turn and request it came before.
func TestReplay(t *testing.T) {
	ctx := context.Background()
	sum, err := measure.NewSummarizer("extractive")
	if err != nil {
		t.Fatal(err)
	}
	defer sum.Close()
	block, err := measure.ClaudeMD()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(block, "<system-reminder>") || !strings.Contains(block, "Always use egrep, never use grep!") {
		t.Fatalf("the CLAUDE.md block read from the corpus is not the real one: %.80q", block)
	}
	for _, tt := range []struct {
		name      string
		kind      string
		withBlock bool
		window    int64 // small enough to compact more than once
	}{
		{"claudecode-coverage-test-fix-eb60294f.anthropic.json", kindClaudeCode, true, 3000},
		{"sweagent-marshmallow-1867-fc-replace-from-source.openai.json", kindSWE, false, 6000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := corpus.Named(t, tt.name)
			h := host{srv: sum.Server(nil), summarizer: sum.Name}
			s := prepare(ctx, h.srv, f, block)
			if s.err != nil {
				t.Fatal(s.err)
			}
			if s.kind != tt.kind {
				t.Errorf("kind %q, want %q", s.kind, tt.kind)
			}
			lifted, err := measure.Lift(f.Path)
			if err != nil {
				t.Fatal(err)
			}
			checkBlock(t, s, lifted.GetMessages(), block, tt.withBlock)

			tr := h.replay(ctx, &s, tt.window)
			if len(tr.compactions) < 2 {
				t.Fatalf("no compaction at window %d (N %d): the test needs two", tr.window, s.tokens)
			}
			checkTrace(t, s, tr)
			fig := measureEnd(&s, tr)
			if fig.requests < 0 || fig.requests > 1 || (fig.claudeMD >= 0) != tt.withBlock || fig.task < 0 {
				t.Errorf("figures %+v", fig)
			}
			if fig.ideal <= 0 || fig.actual < fig.ideal-1e-9 {
				t.Errorf("cache cost actual %.1f, ideal %.1f: actual can never be below ideal", fig.actual, fig.ideal)
			}
		})
	}
}

// checkBlock checks that s carries block as the first text part of its first user message
// when want says so, its messages otherwise those of the file, and that its requests are of
// the conversation without the block.
func checkBlock(t *testing.T, s session, file []*compactorv1.Message, block string, want bool) {
	t.Helper()
	u := measure.FirstUser(s.msgs)
	first := s.msgs[u].GetParts()[0].GetText().GetText()
	if got := first == block; got != want {
		t.Fatalf("first text part of the first user message is the block: %v, want %v", got, want)
	}
	if !want {
		if len(s.msgs) != len(file) || !proto.Equal(s.msgs[u], file[u]) || s.block != "" {
			t.Error("a conversation without the block was changed")
		}
		return
	}
	if len(s.msgs) != len(file) || !proto.Equal(&compactorv1.Message{Role: s.msgs[u].GetRole(), Parts: s.msgs[u].GetParts()[1:]}, file[u]) {
		t.Error("the block is not inserted before the first user message's own parts, or other messages changed")
	}
	if len(s.blockLines) == 0 {
		t.Error("no CLAUDE.md line to measure")
	}
	for _, r := range s.requests {
		for _, l := range r.Lines {
			if strings.Contains(fidelity.Normalize(block), l) {
				t.Errorf("request line %q comes from the CLAUDE.md block", l)
			}
		}
	}
	if len(s.requests) == 0 || s.task != 0 {
		t.Errorf("requests %d, task %d: the user's own words are the task", len(s.requests), s.task)
	}
}

// checkTrace checks that every compaction is recorded before an assistant message, with the
// request it came before, in order, and that the host ended with the conversation's end.
func checkTrace(t *testing.T, s session, tr trace) {
	t.Helper()
	last, needed := -1, 0
	for k, c := range tr.compactions {
		if c.n != k+1 || c.turn <= last || s.msgs[c.turn].GetRole() != compactorv1.Role_ROLE_ASSISTANT {
			t.Errorf("compaction %d: n %d, turn %d (previous %d)", k, c.n, c.turn, last)
		}
		last = c.turn
		if c.request >= len(tr.requests) || tr.requests[c.request].turn != c.turn || !tr.requests[c.request].compacted {
			t.Errorf("compaction %d at turn %d: request %d does not record it", c.n, c.turn, c.request)
		}
		if c.before <= c.trigger || c.after <= 0 || c.after >= c.before || c.usable != tr.window-tr.window/10 {
			t.Errorf("compaction %d: before %d, after %d, trigger %d, usable %d (window %d)", c.n, c.before, c.after, c.trigger, c.usable, tr.window)
		}
		if c.kept > c.needed {
			t.Errorf("compaction %d: kept %d of %d identifiers", c.n, c.kept, c.needed)
		}
		needed += c.needed
		if c.requests < 0 || c.requests > 1 || (c.claudeMD >= 0) != (s.block != "") {
			t.Errorf("compaction %d: requests %v, CLAUDE.md %v after it", c.n, c.requests, c.claudeMD)
		}
	}
	if needed == 0 {
		t.Errorf("no compaction had identifiers the agent went on to write: the measure was not exercised")
	}
	compacted := 0
	for _, r := range tr.requests {
		if r.compacted {
			compacted++
		}
		if r.prefix > r.tokens {
			t.Errorf("request at turn %d: prefix %d > tokens %d", r.turn, r.prefix, r.tokens)
		}
	}
	if compacted != len(tr.compactions) {
		t.Errorf("%d requests compacted, %d compactions", compacted, len(tr.compactions))
	}
	if n := len(tr.final); n == 0 || tr.final[n-1] != s.msgs[len(s.msgs)-1] {
		t.Error("the host does not end with the conversation's last message")
	}
}

// TestOwnBlock: a captured Claude Code request's own block is taken out whole and put back
// where it was.
func TestOwnBlock(t *testing.T) {
	lifted, err := measure.Lift(corpus.Named(t, measure.ClaudeTrace).Path)
	if err != nil {
		t.Fatal(err)
	}
	msgs := lifted.GetMessages()
	block, without, ok := measure.OwnClaudeMD(msgs)
	if !ok || !measure.IsClaudeCode("x.anthropic.json", compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, msgs) {
		t.Fatal("the captured request's block is not recognised")
	}
	back := measure.WithClaudeMD(without, block)
	for i := range msgs {
		if !proto.Equal(msgs[i], back[i]) {
			t.Fatalf("message %d differs after taking the block out and putting it back", i)
		}
	}
	if _, _, ok := measure.OwnClaudeMD(without); ok {
		t.Error("the block is still there after taking it out")
	}
	if measure.IsClaudeCode("claudecode-x.anthropic.json", compactorv1.Provider_PROVIDER_OPENAI_CHAT, msgs) {
		t.Error("an OpenAI body counted as Claude Code")
	}
}

func TestCacheCost(t *testing.T) {
	// 100 tokens; then 150 of which the first 100 are the previous request; then a
	// compaction: 80 tokens, of which 50 are still a shared prefix.
	reqs := []request{{tokens: 100}, {tokens: 150, prefix: 100}, {tokens: 80, prefix: 50, compacted: true}}
	actual, ideal := cacheCost(reqs)
	wantActual := 1.25*100 + (0.1*100 + 1.25*50) + (0.1*50 + 1.25*30)
	wantIdeal := 1.25*100 + (0.1*100 + 1.25*50) + 0.1*80
	if math.Abs(actual-wantActual) > 1e-9 || math.Abs(ideal-wantIdeal) > 1e-9 {
		t.Errorf("cacheCost = %v, %v; want %v, %v", actual, ideal, wantActual, wantIdeal)
	}
	if f := (figures{actual: actual, ideal: ideal}); math.Abs(f.cost()-240.0/205.5) > 1e-9 {
		t.Errorf("cost %v, want %v", f.cost(), 240.0/205.5)
	}
}

func TestSharedPrefix(t *testing.T) {
	text := func(s string) *compactorv1.Message {
		return &compactorv1.Message{Role: compactorv1.Role_ROLE_USER,
			Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}}}
	}
	prev := []*compactorv1.Message{text("a"), text("b"), text("c")}
	cur := []*compactorv1.Message{text("a"), prev[1], text("C"), text("d")} // equal, identical, changed
	if got := sharedPrefix(prev, cur, []int64{1, 10, 100, 1000}); got != 11 {
		t.Errorf("sharedPrefix = %d, want 11", got)
	}
}

func TestConsecutive(t *testing.T) {
	reqs := []request{{}, {compacted: true}, {compacted: true}, {}, {compacted: true}}
	// trigger − the previous compaction's target = 1,500; this one's target is lower (the
	// median turn moved), which does not shrink the headroom the previous one left.
	at := func(req int, added int64) compaction {
		return compaction{n: 1, request: req, added: added, trigger: 6000, target: 2500, usable: 7500, after: 4000, needed: 1, headroom: 1500}
	}
	aboveTarget := at(2, 100)
	aboveTarget.headroom = 0 // the previous compaction landed above its target: no headroom
	tests := []struct {
		c                    compaction
		consecutive, allowed bool
	}{
		{at(1, 9000), false, true}, // the request before did not compact
		{at(2, 2000), true, true},  // grew by more than the gap in one turn
		{at(2, 1500), true, false}, // not more than the gap
		{aboveTarget, true, true},
		{at(4, 100), false, false},
	}
	var m means
	for _, tt := range tests {
		if got := tt.c.consecutive(reqs); got != tt.consecutive {
			t.Errorf("request %d: consecutive %v, want %v", tt.c.request, got, tt.consecutive)
		}
		if got := tt.c.allowed(); got != tt.allowed {
			t.Errorf("request %d, +%d: allowed %v, want %v", tt.c.request, tt.c.added, got, tt.allowed)
		}
		m.addCompaction(tt.c, reqs)
	}
	if m.consecutive != 3 || m.allowed != 2 {
		t.Errorf("means: %d consecutive, %d allowed; want 3, 2", m.consecutive, m.allowed)
	}
}

// TestEndFigures measures a hand-built final conversation: lines only in history a summary
// covers (not sent) do not count, lines in the summary and in later messages do, whatever
// their white space.
func TestEndFigures(t *testing.T) {
	text := func(role compactorv1.Role, kind compactorv1.MessageKind, s string) *compactorv1.Message {
		return &compactorv1.Message{Role: role, Kind: kind,
			Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}}}
	}
	user, summary := compactorv1.Role_ROLE_USER, compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY
	none := compactorv1.MessageKind_MESSAGE_KIND_UNSPECIFIED
	block := "<system-reminder>\n# claudeMd\n- Always use egrep, never grep!\n- Never run vitest in watch mode\n</system-reminder>\n"
	conv := []*compactorv1.Message{
		text(user, none, block),
		text(user, none, "Fix the parser so that it accepts tabs.\nAlso   keep the old API intact."),
		text(compactorv1.Role_ROLE_ASSISTANT, none, "On it."),
		text(user, none, "Now add a test for the tab case please."),
	}
	s := session{block: block, blockLines: fidelity.Lines(block), requests: fidelity.Requests(conv[1:]), task: 0}
	if len(s.requests) != 2 || len(s.blockLines) != 4 {
		t.Fatalf("requests %d, block lines %d: the hand-built session is wrong", len(s.requests), len(s.blockLines))
	}
	final := []*compactorv1.Message{
		// Covered by the summary that follows: not sent, not counted.
		text(user, none, "Fix the parser so that it accepts tabs.\n- Never run vitest in watch mode"),
		text(user, summary, engine.SummaryMessageText("The user asked:\nAlso keep the old API intact.\n- Always use egrep, never grep!", 3, 0)),
		text(user, none, "Now add a test for the tab case please."),
	}
	fig := measureEnd(&s, trace{final: final})
	if math.Abs(fig.requests-0.75) > 1e-9 || math.Abs(fig.task-0.5) > 1e-9 {
		t.Errorf("requests %v, task %v; want 0.75 (the task half kept, the second request whole), 0.5", fig.requests, fig.task)
	}
	// The block's lines: <system-reminder>, # claudeMd, two rules; one rule is in the summary.
	if math.Abs(fig.claudeMD-0.25) > 1e-9 {
		t.Errorf("CLAUDE.md %v, want 0.25", fig.claudeMD)
	}
}

// TestReport runs the command's whole path on two fixtures, cold and warm, and checks the
// report has every figure of the table.
func TestReport(t *testing.T) {
	files := []corpus.File{corpus.Named(t, "sweagent-ctf-rev-rock.openai.json"), corpus.Named(t, "claudecode-hello-world-script-a669c92e.anthropic.json")}
	rep, err := replayAll(context.Background(), options{summarizer: "extractive", windows: []float64{0.35}, warm: true}, files)
	if err != nil {
		t.Fatal(err)
	}
	rep.corpus = "test"
	var b bytes.Buffer
	writeMarkdown(&b, rep)
	for _, want := range []string{"## Means over the sessions that compacted", "lines of the user's requests", "SWE-agent and mini-swe-agent tasks",
		"CLAUDE.md block", "identifiers the agent wrote", "5th and later", "right after another", "share of the usable window",
		"above the target", "cache prices", "## Warm cache against cold", "## Sessions at 35%", "## Compactions at 35%",
		"| sweagent-ctf-rev-rock.openai.json | 1 |", "-warm", "make session"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if m := rep.means(rep.cold[0]); m.sessions != 2 || m.compacted != 1 {
		t.Errorf("means over %d sessions, %d compacted; want 2, 1", m.sessions, m.compacted)
	}
}

// TestReportBilled: against the fake provider, each session's row says the summary input its
// calls billed, so that a summarizer's bill can be compared session by session.
func TestReportBilled(t *testing.T) {
	files := []corpus.File{corpus.Named(t, "sweagent-ctf-rev-rock.openai.json")}
	rep, err := replayAll(context.Background(), options{summarizer: "anthropic-agent", windows: []float64{0.35}}, files)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	writeMarkdown(&b, rep)
	b2 := summaryBilled(rep.cold[0])
	want := fmt.Sprintf("| %.0f (%d) |\n", b2.billed, b2.calls)
	if b2.calls == 0 || b2.billed <= 0 || !strings.Contains(b.String(), "summary input billed (calls) |") || !strings.Contains(b.String(), want) {
		t.Errorf("the session row does not say its bill %q (%d calls):\n%s", want, b2.calls, b.String())
	}
}

// TestHeadroom: -headroom reaches every call's policy: a session replayed with a larger
// headroom_turns lands its compactions at lower targets than with the default.
func TestHeadroom(t *testing.T) {
	ctx := context.Background()
	sum, err := measure.NewSummarizer("extractive")
	if err != nil {
		t.Fatal(err)
	}
	defer sum.Close()
	f := corpus.Named(t, "sweagent-marshmallow-1867-fc-replace-from-source.openai.json")
	targets := func(headroom int32) (lo, hi int64) {
		h := host{srv: sum.Server(nil), summarizer: sum.Name, headroom: headroom}
		s := prepare(ctx, h.srv, f, "")
		if s.err != nil {
			t.Fatal(s.err)
		}
		tr := h.replay(ctx, &s, 6000)
		if len(tr.compactions) == 0 {
			t.Fatalf("headroom %d: no compaction", headroom)
		}
		lo = math.MaxInt64
		for _, c := range tr.compactions {
			lo, hi = min(lo, c.target), max(hi, c.target)
		}
		return lo, hi
	}
	defLo, defHi := targets(0)
	lo, hi := targets(30)
	if hi > defLo || lo >= defHi {
		t.Errorf("targets with headroom_turns 30: %d–%d; with the default: %d–%d (want all at most the default's least, below its most)", lo, hi, defLo, defHi)
	}
}

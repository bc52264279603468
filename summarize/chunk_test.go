package summarize

import (
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/engine/tokenizer"
	"github.com/compactord/compactord/internal/irtest"
)

func TestTurnEnds(t *testing.T) {
	call := func(id string) *compactorv1.Part { return irtest.Call(id, "bash", `{"cmd":"ls"}`) }
	approval := func(id string) *compactorv1.Part {
		return &compactorv1.Part{Content: &compactorv1.Part_ApprovalRequest{ApprovalRequest: &compactorv1.ToolApprovalRequest{ApprovalId: id, ToolCallId: "c"}}}
	}
	approved := func(id string) *compactorv1.Message {
		return irtest.Msg(compactorv1.Role_ROLE_USER, &compactorv1.Part{Content: &compactorv1.Part_ApprovalResponse{
			ApprovalResponse: &compactorv1.ToolApprovalResponse{ApprovalId: id, Approved: true}}})
	}
	result := func(id string) *compactorv1.Message { return irtest.Result(id, "bash", irtest.OutText("ok")) }
	for _, tc := range []struct {
		name string
		msgs []*compactorv1.Message
		want string // one letter per message: e a chunk may end after it, - not
	}{
		{"texts", []*compactorv1.Message{irtest.User("a"), irtest.Assistant("b")}, "ee"},
		{"call and result", []*compactorv1.Message{irtest.User("a"), irtest.Assistant("", call("1")), result("1"), irtest.Assistant("b")}, "e-ee"},
		{"parallel calls", []*compactorv1.Message{irtest.Assistant("", call("1"), call("2")), result("1"), result("2")}, "--e"},
		{"interleaved", []*compactorv1.Message{irtest.Assistant("", call("1")), irtest.Assistant("", call("2")), result("1"), result("2")}, "---e"},
		{"pending call", []*compactorv1.Message{irtest.Assistant("", call("1")), irtest.User("a")}, "ee"},
		{"approval", []*compactorv1.Message{irtest.Assistant("", call("c"), approval("ap")), approved("ap"), result("c")}, "--e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got strings.Builder
			for _, e := range TurnEnds(tc.msgs) {
				got.WriteByte("-e"[b2i(e)])
			}
			if got.String() != tc.want {
				t.Errorf("TurnEnds = %s, want %s", got.String(), tc.want)
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestFit: an LLM summarizer reads a range within its bound whole, a longer one up to a turn
// boundary within the bound (prompt, anchor and instructions counted), and at least a turn;
// the extractive summarizer reads any range whole.
func TestFit(t *testing.T) {
	msgs := irtest.Conversation(30)[1:]          // ≈ 520 tokens a turn of four messages
	safe := func(n int) bool { return n%4 != 2 } // not between a tool call and its result
	enc, err := tokenizer.New(tokenizer.O200k)
	if err != nil {
		t.Fatal(err)
	}
	count := func(s string) int { return int(enc.Count(s)) }
	size := func(in engine.SummaryInput) int {
		return count(engine.SummarySystemPrompt()) + count(engine.SummaryPrompt(in, engine.TranscriptOptions{}))
	}
	in := engine.SummaryInput{Messages: msgs, Instructions: "focus on the tests"}
	full := size(in)
	unanchored := Fit(&LLM{maxInput: 3000}, Request{SummaryInput: in, Count: count})
	for _, tc := range []struct {
		name   string
		bound  int
		anchor string
		want   func(n int) bool
	}{
		{"all fit", full + 2*len(msgs), "", func(n int) bool { return n == len(msgs) }},
		{"short of all", full - 1, "", func(n int) bool { return n < len(msgs) && safe(n) }},
		{"chunk", 3000, "", func(n int) bool { return n > 4 && safe(n) }},
		{"anchor counted", 3000, strings.Repeat("earlier work. ", 400), func(n int) bool { return n > 0 && n < unanchored && safe(n) }},
		{"first turn at least", 10, "", func(n int) bool { return n == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &LLM{maxInput: tc.bound}
			in := in
			in.Anchor = tc.anchor
			n := Fit(l, Request{SummaryInput: in, Count: count})
			if !tc.want(n) {
				t.Fatalf("Fit = %d of %d messages", n, len(msgs))
			}
			if n == 1 {
				return
			}
			in.Messages = msgs[:n]
			if got := size(in); got > tc.bound {
				t.Errorf("the prompt of the %d messages Fit chose has %d tokens, over the bound of %d", n, got, tc.bound)
			}
			if n < len(msgs) {
				next := n + 1
				if !safe(next) {
					next++
				}
				in.Messages = msgs[:next]
				if got := size(in); got <= tc.bound-2*next {
					t.Errorf("the next turn boundary (%d tokens) fits the bound of %d", got, tc.bound)
				}
			}
		})
	}
	if n := Fit(NewExtractive("x", 0, Options{}), Request{SummaryInput: engine.SummaryInput{Messages: msgs}}); n != len(msgs) {
		t.Errorf("extractive: Fit = %d, want all %d", n, len(msgs))
	}
}

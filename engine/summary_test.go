package engine

import (
	"flag"
	"github.com/compactord/compactord/internal/golden"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/irtest"
)

// update rewrites golden files: go test ./engine -run <Test> -update
var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// golden compares got with testdata/<name>, rewriting it under -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got, *update)
}

func TestSummaryTextRoundTripsTheFraming(t *testing.T) {
	tests := []struct {
		name string
		msg  *compactorv1.Message
		want string
	}{
		{"framed", SummaryMessage("  ## User requests\n- fix the bug\n", 12, 0), "## User requests\n- fix the bug"},
		{"framed summary that mentions the closing tag", SummaryMessage("a </summary> b", 3, 1), "a </summary> b"},
		{"foreign summary kept whole", irtest.User("Summary written elsewhere.\n<summary>x</summary>"), "Summary written elsewhere.\n<summary>x</summary>"},
		{"empty", &compactorv1.Message{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SummaryText(tt.msg); got != tt.want {
				t.Errorf("SummaryText = %q, want %q", got, tt.want)
			}
		})
	}
	m := SummaryMessage("s", 42, 0)
	if m.GetRole() != compactorv1.Role_ROLE_USER || m.GetKind() != compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
		t.Errorf("SummaryMessage role %v kind %v", m.GetRole(), m.GetKind())
	}
	txt := m.GetParts()[0].GetText().GetText()
	if !strings.HasPrefix(txt, "This session continues from an earlier conversation that was compacted") || !strings.Contains(txt, "(42 messages)") {
		t.Errorf("framing does not say the session continues from a summary: %q", txt)
	}
}

func TestSummaryPrompt(t *testing.T) {
	pinned := irtest.User("PINNED PROJECT RULES")
	pinned.Pinned = true
	msgs := []*compactorv1.Message{irtest.Msg(compactorv1.Role_ROLE_SYSTEM, irtest.Text("SYSTEM PROMPT")), pinned, irtest.User("Rename `Foo` to `Bar` in pkg/a.go")}
	tests := []struct {
		name     string
		in       SummaryInput
		contains []string
		absent   []string
	}{
		{
			name:     "plain",
			in:       SummaryInput{Messages: msgs},
			contains: []string{"<transcript>\n[m2 user]\nRename `Foo` to `Bar` in pkg/a.go\n", "Summarize the transcript", "End every line of the summary with the messages it came from"},
			absent:   []string{"<previous-summary>", "<instructions>", "SYSTEM PROMPT", "PINNED PROJECT RULES"},
		},
		{
			name:     "anchored with instructions",
			in:       SummaryInput{Messages: msgs, Anchor: "earlier: user wants Go 1.26", Instructions: "focus on the API"},
			contains: []string{"<previous-summary>\nearlier: user wants Go 1.26\n</previous-summary>", "covers both the previous summary and the transcript", "<instructions>\nfocus on the API\n</instructions>"},
		},
		{
			// A request kept beside the summary is shown for context, marked so the summary
			// does not repeat it; the sections say to leave it out.
			name:     "kept request",
			in:       SummaryInput{Messages: msgs, Kept: msgs[2:]},
			contains: []string{"[m2 user, kept verbatim after the summary: do not repeat]\nRename `Foo`", "except the messages marked as kept verbatim"},
		},
		{
			// Messages are numbered by their positions in the conversation Compact received.
			name:     "positions",
			in:       SummaryInput{Messages: msgs, Positions: []int{0, 1, 40}},
			contains: []string{"<transcript>\n[m40 user]\nRename `Foo`"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SummaryPrompt(tt.in, TranscriptOptions{})
			for _, s := range SummarySections {
				if !strings.Contains(got, s.Heading+": ") {
					t.Errorf("prompt lacks section %q", s.Heading)
				}
			}
			for _, s := range tt.contains {
				if !strings.Contains(got, s) {
					t.Errorf("prompt lacks %q:\n%s", s, got)
				}
			}
			for _, s := range tt.absent {
				if strings.Contains(got, s) {
					t.Errorf("prompt has %q", s)
				}
			}
		})
	}
	if !strings.Contains(SummarySystemPrompt(), "verbatim") {
		t.Error("system prompt does not ask for verbatim quotes")
	}
}

func TestTranscriptRendersEveryPartKind(t *testing.T) {
	long := "line 1\n" + strings.Repeat("noise\n", 2000) + "FAILED: test_x\n"
	msgs := []*compactorv1.Message{
		irtest.Msg(compactorv1.Role_ROLE_SYSTEM, irtest.Text("You are helpful.")),
		irtest.Msg(compactorv1.Role_ROLE_USER, irtest.Text("Look at this"),
			&compactorv1.Part{Content: &compactorv1.Part_Image{Image: &compactorv1.ImagePart{MediaType: "image/png", Source: &compactorv1.ImagePart_Data{Data: []byte{1, 2}}}}},
			&compactorv1.Part{Content: &compactorv1.Part_File{File: &compactorv1.FilePart{Filename: "notes.txt", MediaType: "text/plain", Source: &compactorv1.FilePart_Data{Data: []byte("remember the milk")}}}}),
		irtest.Msg(compactorv1.Role_ROLE_ASSISTANT,
			&compactorv1.Part{Content: &compactorv1.Part_Reasoning{Reasoning: &compactorv1.ReasoningPart{Text: "SECRET THOUGHTS"}}},
			irtest.Text("Running the tests."),
			irtest.Call("c1", "bash", `{"command":"go test ./..."}`)),
		irtest.Result("c1", "bash", irtest.OutText(long)),
		irtest.Assistant("", irtest.Call("c2", "read", `{"path":"missing.go"}`)),
		irtest.Result("c2", "read", irtest.OutError("open missing.go: no such file")),
		irtest.Msg(compactorv1.Role_ROLE_ASSISTANT, &compactorv1.Part{Content: &compactorv1.Part_ApprovalRequest{ApprovalRequest: &compactorv1.ToolApprovalRequest{ApprovalId: "a1", ToolCallId: "c3"}}}),
		irtest.Msg(compactorv1.Role_ROLE_TOOL, &compactorv1.Part{Content: &compactorv1.Part_ApprovalResponse{ApprovalResponse: &compactorv1.ToolApprovalResponse{ApprovalId: "a1", Reason: "too risky"}}}),
		{Role: compactorv1.Role_ROLE_USER, Kind: compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT, Parts: []*compactorv1.Part{irtest.Text("PROMPT TEXT")}},
	}
	got := Transcript(msgs, TranscriptOptions{MaxToolOutputBytes: 300})
	for _, absent := range []string{"SECRET THOUGHTS", "PROMPT TEXT"} {
		if strings.Contains(got, absent) {
			t.Errorf("transcript contains %q", absent)
		}
	}
	if len(got) > 2000 {
		t.Errorf("transcript is %d bytes: the long tool output was not capped", len(got))
	}
	checkGolden(t, "summary/transcript.golden", got)
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		name     string
		s        string
		max      int
		want     string // exact, when set
		contains []string
	}{
		{name: "short", s: "hello", max: 10, want: "hello"},
		{name: "exact", s: "hello", max: 5, want: "hello"},
		{name: "no limit", s: "hello", max: 0, want: "hello"},
		{name: "head and tail", s: strings.Repeat("a", 100) + strings.Repeat("z", 100), max: 30, contains: []string{"aaaaaaaaaaaaaaaaaaaa", "zzzzzzzzzz", "bytes omitted"}},
		{name: "multibyte", s: strings.Repeat("é", 100), max: 31, contains: []string{"é", "bytes omitted"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Truncate(tt.s, tt.max)
			if tt.want != "" && got != tt.want {
				t.Errorf("Truncate = %q, want %q", got, tt.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("Truncate = %q: invalid UTF-8", got)
			}
			for _, c := range tt.contains {
				if !strings.Contains(got, c) {
					t.Errorf("Truncate = %q, lacks %q", got, c)
				}
			}
			if tt.want == "" && len(got) >= len(tt.s) {
				t.Errorf("Truncate did not shorten: %d → %d bytes", len(tt.s), len(got))
			}
		})
	}
}

// FuzzTruncate: the result is valid UTF-8 when the input is, never longer than the input
// plus the marker, and s itself when it fits.
func FuzzTruncate(f *testing.F) {
	f.Add("hello world", 5)
	f.Add(strings.Repeat("é\n", 50), 17)
	f.Add("\xff\xfe", 1)
	f.Fuzz(func(t *testing.T, s string, max int) {
		got := Truncate(s, max)
		if max <= 0 || len(s) <= max {
			if got != s {
				t.Fatalf("Truncate(%q, %d) = %q, want it unchanged", s, max, got)
			}
			return
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Truncate(%q, %d) = %q: invalid UTF-8", s, max, got)
		}
		if len(got) > max+48 {
			t.Fatalf("Truncate(%q, %d) is %d bytes", s, max, len(got))
		}
	})
}

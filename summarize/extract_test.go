package summarize

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/golden"
	"github.com/compactord/compactord/internal/irtest"
)

// sumFirstUserText returns the user's words (engine.UserWords) of the first request a summary
// of msgs covers: the first that is not kept in the head (a harness's task beside its
// standing instructions is). sumLastUserText returns those of the last.
func sumFirstUserText(msgs []*compactorv1.Message) string {
	if reqs := summarizedRequests(msgs); len(reqs) > 0 {
		return engine.UserWords(msgs[reqs[0]])
	}
	return ""
}

func sumLastUserText(msgs []*compactorv1.Message) string {
	if reqs := summarizedRequests(msgs); len(reqs) > 0 {
		return engine.UserWords(msgs[reqs[len(reqs)-1]])
	}
	return ""
}

// summarizedRequests returns the requests of msgs a summary covers: those not in the head.
func summarizedRequests(msgs []*compactorv1.Message) []int {
	var out []int
	for _, i := range engine.Requests(msgs) {
		if !engine.InHead(msgs[i]) {
			out = append(out, i)
		}
	}
	return out
}

// sumPrefix returns the first line of s, at most n bytes, for "is it quoted" checks.
func sumPrefix(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > n {
		s = s[:n]
		for len(s) > 0 && s[len(s)-1] >= 0x80 {
			s = s[:len(s)-1]
		}
	}
	return s
}

type keepsCase struct {
	name     string
	in       engine.SummaryInput
	opt      ExtractiveOptions
	contains []string
	absent   []string
}

func keepsWhatMattersCases() []keepsCase {
	conv := []*compactorv1.Message{
		irtest.Msg(compactorv1.Role_ROLE_SYSTEM, irtest.Text("You are a coding agent.")),
		irtest.User("Port the parser in `src/parse.py` to Rust. Keep the public API unchanged."),
		{Role: compactorv1.Role_ROLE_USER, Pinned: true, Parts: []*compactorv1.Part{irtest.Text("PINNED: always run cargo fmt")}},
		irtest.Assistant("I'll read the file first.", irtest.Call("c1", "read_file", `{"path":"src/parse.py","limit":400,"offset":0,"encoding":"utf-8"}`)),
		irtest.Result("c1", "read_file", irtest.OutText("def parse(s):\n    return s\n")),
		irtest.Assistant("", irtest.Call("c2", "bash", `{"command":"cargo build"}`)),
		irtest.Result("c2", "bash", irtest.OutText("   Compiling parser v0.1.0\nerror[E0425]: cannot find value `tokens` in this scope\n")),
		irtest.Assistant("", irtest.Call("c3", "read_file", `{"path":"src/missing.rs"}`)),
		irtest.Result("c3", "read_file", irtest.OutError("ENOENT: no such file src/missing.rs")),
		irtest.User("Also add tests for empty input."),
		irtest.Assistant("Fixed the `tokens` binding in src/lib.rs; next I will add the empty-input test."),
	}
	outputs := []*compactorv1.Message{
		irtest.User("Upgrade the service."),
		irtest.Assistant("", irtest.Call("r1", "bash", `{"command":"cat README"}`)),
		irtest.Result("r1", "bash", irtest.OutText(strings.Repeat("The service serves HTTP on port 8080.\n", 40))),
		irtest.Assistant("", irtest.Call("r2", "bash", `{"command":"ls db"}`)),
		irtest.Result("r2", "bash", irtest.OutText("0001_init.sql\nmigration 0002_users.sql adds users.email NOT NULL\n")),
		irtest.Assistant("", irtest.Call("r3", "bash", `{"command":"cat CHANGES"}`)),
		irtest.Result("r3", "bash", irtest.OutText("v2: new logging\n")),
	}
	return []keepsCase{
		{
			name: "everything fits",
			in:   engine.SummaryInput{Messages: conv},
			contains: []string{
				"## User requests (verbatim)\n- Port the parser in `src/parse.py` to Rust. Keep the public API unchanged.\n- Also add tests for empty input.\n",
				"## Where it stopped\n- last action: read_file(path=src/missing.rs) → failed: error: ENOENT: no such file src/missing.rs\n" +
					"- last intent: Fixed the `tokens` binding in src/lib.rs; next I will add the empty-input test.\n",
				"## Errors\n- bash(cargo build): error[E0425]: cannot find value `tokens` in this scope\n",
				// Every ledger line says what was done; a file only named says that too.
				"## Files (what was done to each)\n- src/parse.py: read\n- src/missing.rs: read (failed)\n- src/lib.rs: named, not opened\n",
				// With room left, the call with every argument it was given.
				"- read_file(path=src/parse.py, encoding=utf-8, limit=400, offset=0) → def parse(s): / return s\n",
				"- bash(command=cargo build) → failed: error[E0425]: cannot find value `tokens` in this scope\n",
				"## Agent notes\n- I'll read the file first.\n",
			},
			absent: []string{"You are a coding agent", "PINNED"},
		},
		{
			name:     "tight budget keeps the first and latest requests and the latest statement",
			in:       engine.SummaryInput{Messages: conv},
			opt:      ExtractiveOptions{MaxTokens: 90},
			contains: []string{"Port the parser in `src/parse.py`", "Also add tests for empty input.", "Fixed the `tokens` binding"},
			absent:   []string{"## Commands and results", "## Agent notes"},
		},
		{
			name: "extractive anchor is merged section by section",
			in: engine.SummaryInput{
				Messages: conv[9:],
				Anchor:   ExtractiveSummary(engine.SummaryInput{Messages: conv[:9]}, ExtractiveOptions{}),
			},
			contains: []string{
				"## User requests (verbatim)\n- Port the parser in `src/parse.py` to Rust. Keep the public API unchanged.\n- Also add tests for empty input.\n",
				"- bash(command=cargo build) → failed: error[E0425]",
				"- src/missing.rs: read (failed)\n",
				"- earlier, last intent: I'll read the file first.\n",
			},
			absent: []string{"## Earlier summary"},
		},
		{
			name:     "free-form anchor is kept as the earlier summary",
			in:       engine.SummaryInput{Messages: conv[9:], Anchor: "The user asked to port src/parse.py to Rust.\n\n- decided: keep the API"},
			contains: []string{"## Earlier summary\nThe user asked to port src/parse.py to Rust.\n\n- decided: keep the API\n\n## User requests"},
		},
		{
			name: "text-protocol agent: observations are outputs, shell blocks are calls",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				irtest.User("Fix DateFormat.Y() zero padding."),
				irtest.Assistant("THOUGHT: reproduce first.\n\n```bash\npython repro.py\n```"),
				irtest.User("<returncode>1</returncode>\n<output>\nYear: 123\nFAIL: Year is not zero-padded\n</output>"),
				irtest.Assistant("THOUGHT: fix it.\n\n```bash\nsed -i 's/%d/%04d/' django/utils/dateformat.py\n```"),
				irtest.User("<returncode>0</returncode>\n<output>\n</output>"),
			}},
			contains: []string{
				"## User requests (verbatim)\n- Fix DateFormat.Y() zero padding.\n\n",
				"## Errors\n- `python repro.py`: FAIL: Year is not zero-padded\n",
				"- last action: `sed -i 's/%d/%04d/' django/utils/dateformat.py` → ok\n",
				"## Files (what was done to each)\n- repro.py: ran (failed)\n- django/utils/dateformat.py: edited; last edit wrote `%04d`\n",
				"- last intent: fix it.\n",
			},
			absent: []string{"<returncode>"},
		},
		{
			name: "ledger: what each tool and command did to each file",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				irtest.User("Make the date tests pass."),
				irtest.Assistant("", irtest.Call("e1", "str_replace_editor", `{"command":"view","path":"/repo/src/dates.py"}`)),
				irtest.Result("e1", "str_replace_editor", irtest.OutText("def year(): ...")),
				irtest.Assistant("", irtest.Call("e2", "str_replace_editor", `{"command":"str_replace","path":"/repo/src/dates.py","old_str":"a","new_str":"b"}`)),
				irtest.Result("e2", "str_replace_editor", irtest.OutText("edited")),
				irtest.Assistant("", irtest.Call("e3", "str_replace_editor", `{"command":"create","path":"/repo/tests/test_year.py","file_text":"..."}`)),
				irtest.Result("e3", "str_replace_editor", irtest.OutText("created")),
				irtest.Assistant("", irtest.Call("w1", "Write", `{"file_path":"/repo/notes.md","content":"x"}`)),
				irtest.Result("w1", "Write", irtest.OutText("ok")),
				irtest.Assistant("", irtest.Call("b1", "Bash", `{"command":"cd /repo && python -m pytest tests/test_year.py -q; rm scratch/tmp.txt"}`)),
				irtest.Result("b1", "Bash", irtest.OutText("1 passed")),
				irtest.Assistant("", irtest.Call("p1", "apply_patch", `{"input":"*** Begin Patch\n*** Update File: src/cli.go\n@@\n*** Delete File: src/old.go\n*** End Patch"}`)),
				irtest.Result("p1", "apply_patch", irtest.OutText("Done")),
				irtest.Assistant("", irtest.Call("e4", "str_replace_editor", `{"command":"str_replace","path":"/repo/src/dates.py","old_str":"zz","new_str":"b"}`)),
				irtest.Result("e4", "str_replace_editor", irtest.OutError("No replacement was performed: old_str zz did not appear")),
			}},
			contains: []string{"## Files (what was done to each)\n" +
				"- /repo/notes.md: written; last edit wrote `x`; then Bash(command=cd /repo && python -m pytest tests/test_year.py -q; rm scratch/tmp.txt) → 1 passed\n" +
				"- /repo/tests/test_year.py: created, tested; last edit wrote `...`; then Bash(command=cd /repo && python -m pytest tests/test_year.py -q; rm scratch/tmp.txt) → 1 passed\n" +
				"- /repo/scratch/tmp.txt: deleted\n" +
				"- src/cli.go: edited\n" +
				"- src/old.go: deleted\n" +
				"- /repo/src/dates.py: read, edited, edited (failed); last edit wrote `b`\n"},
		},
		{
			// A mini-swe-agent writes its reproduction in four files, then runs the last: the
			// run is said with the file it ran, not after every file written before it; "./"
			// names the same file, and the script's #!/bin/bash names no file of the work.
			name: "ledger: a run said once, ./ paths, no program paths",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				irtest.User("Make migrate accept a package without __init__.py."),
				irtest.Assistant("", irtest.Call("w1", "bash", `{"command":"cat <<'EOF' > app/models.py\nclass Thing(models.Model):\n    pass\nEOF"}`)),
				irtest.Result("w1", "bash", irtest.OutText("")),
				irtest.Assistant("", irtest.Call("w2", "bash", `{"command":"cat <<'EOF' > settings.py\nSECRET_KEY = 'x'\nEOF"}`)),
				irtest.Result("w2", "bash", irtest.OutText("")),
				irtest.Assistant("", irtest.Call("w3", "bash", `{"command":"cat <<'EOF' > run.sh\n#!/bin/bash\npython manage.py migrate\nEOF\nchmod +x run.sh"}`)),
				irtest.Result("w3", "bash", irtest.OutText("")),
				irtest.Assistant("", irtest.Call("r1", "bash", `{"command":"./run.sh"}`)),
				irtest.Result("r1", "bash", irtest.OutText("FAILURE: Migration NOT applied.")),
				irtest.Assistant("", irtest.Call("l1", "bash", `{"command":"ls /tmp"}`)),
			}},
			contains: []string{
				"- app/models.py: written; it defines `class Thing(models.Model)`\n",
				"- settings.py: written; last edit wrote `SECRET_KEY = 'x'`\n",
				"- run.sh: written, ran; last edit wrote `python manage.py migrate`; then bash(command=./run.sh) → FAILURE: Migration NOT applied.\n",
			},
			absent: []string{"./run.sh: named", "/bin/bash: named", "manage.py: ran"},
		},
		{
			name: "errors: resolved when the same call later succeeds, open otherwise",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				irtest.User("Fix the failing tests."),
				irtest.Assistant("", irtest.Call("t1", "bash", `{"command":"go test ./parse"}`)),
				irtest.Result("t1", "bash", irtest.OutText("--- FAIL: TestEmpty (0.00s)\nFAIL")),
				irtest.Assistant("", irtest.Call("v1", "bash", `{"command":"go vet ./..."}`)),
				irtest.Result("v1", "bash", irtest.OutText("lex.go:3: unreachable code\nexit status 1\nerror: vet failed")),
				irtest.Assistant("", irtest.Call("t2", "bash", `{"command":"go test ./parse"}`)),
				irtest.Result("t2", "bash", irtest.OutText("ok  example/parse 0.01s")),
				irtest.Assistant("Tests pass now; vet still complains.", irtest.Call("t3", "bash", `{"command":"go vet ./lex"}`)),
			}},
			contains: []string{
				"## Errors\n- bash(go test ./parse): --- FAIL: TestEmpty (0.00s) → fixed: the same call succeeded later\n- bash(go vet ./...): error: vet failed\n\n",
				"- last intent: Tests pass now; vet still complains.\n- waiting for the result of: bash(command=go vet ./lex)\n",
			},
			absent: []string{"## Agent notes"},
		},
		{
			name: "instructions: the tool outputs that hold their terms are kept first",
			in:   engine.SummaryInput{Instructions: "Keep the database migration details.", Messages: outputs},
			opt:  ExtractiveOptions{MaxTokens: 110},
			contains: []string{"Instructions for this summary:\n- Keep the database migration details.",
				"- bash(command=ls db) → 0001_init.sql / migration 0002_users.sql adds users.email NOT NULL\n"},
			absent: []string{"port 8080"},
		},
		{
			name:     "without instructions the outputs with names are kept first, and the latest",
			in:       engine.SummaryInput{Messages: outputs},
			opt:      ExtractiveOptions{MaxTokens: 80},
			contains: []string{"- last action: bash(command=cat CHANGES) → v2: new logging\n", "0002_users.sql adds users.email"},
			absent:   []string{"The service serves HTTP"},
		},
		{
			name:     "compaction artifacts are skipped",
			in:       engine.SummaryInput{Messages: append([]*compactorv1.Message{{Role: compactorv1.Role_ROLE_USER, Kind: compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT, Parts: []*compactorv1.Part{irtest.Text("PLEASE SUMMARIZE")}}}, conv[1:2]...)},
			contains: []string{"Port the parser"},
			absent:   []string{"PLEASE SUMMARIZE"},
		},
	}
}

func TestExtractiveSummaryKeepsWhatMatters(t *testing.T) {
	for _, tt := range keepsWhatMattersCases() {
		t.Run(tt.name, func(t *testing.T) {
			got := ExtractiveSummary(tt.in, tt.opt)
			budget := tt.opt.MaxTokens
			if budget == 0 {
				budget = 2048
			}
			if n := ApproxTokens(got); int64(n) > budget {
				t.Errorf("summary is %d tokens, budget %d", n, budget)
			}
			checkHasLacks(t, got, tt.contains, tt.absent)
			if again := ExtractiveSummary(tt.in, tt.opt); again != got {
				t.Error("summary is not deterministic")
			}
		})
	}
}

func TestExtractiveSummaryOnCorpus(t *testing.T) {
	for _, f := range corpus.Files(t) {
		if f.Format != "openai" {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			msgs := irtest.ReadOpenAIChat(t, corpus.Read(t, f))
			first, last := sumFirstUserText(msgs), sumLastUserText(msgs)
			for _, budget := range []int64{128, 512, 2048, 8192} {
				opt := ExtractiveOptions{MaxTokens: budget}
				got := ExtractiveSummary(engine.SummaryInput{Messages: msgs}, opt)
				if n := ApproxTokens(got); int64(n) > budget {
					t.Errorf("budget %d: summary is %d tokens", budget, n)
				}
				if strings.TrimSpace(got) == "" {
					t.Errorf("budget %d: empty summary", budget)
				}
				checkCited(t, got, len(msgs))
				if budget >= 512 {
					for _, want := range []string{sumPrefix(first, 40), sumPrefix(last, 40)} {
						if !strings.Contains(got, want) {
							t.Errorf("budget %d: summary does not quote %q", budget, want)
						}
					}
					// Names are said in statements, not dumped: at most a tenth of the lines is
					// a bare name.
					if bare, lines := fidelity.BareLines(got); 10*bare > lines {
						t.Errorf("budget %d: %d of %d lines state only a name", budget, bare, lines)
					}
				}
			}

			// Rolling: summarize the first half, then the rest anchored on it.
			half := len(msgs) / 2
			opt := ExtractiveOptions{MaxTokens: 2048}
			s1 := ExtractiveSummary(engine.SummaryInput{Messages: msgs[:half]}, opt)
			s2 := ExtractiveSummary(engine.SummaryInput{Messages: msgs[half:], Anchor: s1}, opt)
			if n := ApproxTokens(s2); n > 2048 {
				t.Errorf("rolling summary is %d tokens", n)
			}
			if first := sumFirstUserText(msgs[:half]); first != "" && !strings.Contains(s2, sumPrefix(first, 40)) {
				t.Errorf("rolling summary lost the first request %q", sumPrefix(first, 40))
			}
		})
	}
}

func TestExtractiveSummaryGolden(t *testing.T) {
	for _, name := range []string{"taubench-airline-t42-r1.openai.json", "sweagent-testrepo-1c2844-fc.openai.json"} {
		t.Run(name, func(t *testing.T) {
			f := corpus.Named(t, name)
			msgs := irtest.ReadOpenAIChat(t, corpus.Read(t, f))
			got := ExtractiveSummary(engine.SummaryInput{Messages: msgs}, ExtractiveOptions{MaxTokens: 1024})
			golden.Check(t, filepath.Join("testdata", "extractive-"+strings.TrimSuffix(name, ".openai.json")+".golden"), got, *update)
		})
	}
}

func BenchmarkExtractiveSummary(b *testing.B) {
	f := corpus.Largest(b)
	if f.Format != "openai" {
		b.Skipf("largest corpus file %s is not OpenAI-shaped", f.Name)
	}
	msgs := irtest.ReadOpenAIChat(b, corpus.Read(b, f))
	b.ReportAllocs()
	for b.Loop() {
		ExtractiveSummary(engine.SummaryInput{Messages: msgs}, ExtractiveOptions{MaxTokens: 4096})
	}
}

func ExampleExtractiveSummary() {
	text := func(role compactorv1.Role, s string) *compactorv1.Message {
		return &compactorv1.Message{Role: role, Parts: []*compactorv1.Part{
			{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}}}
	}
	call := &compactorv1.Message{Role: compactorv1.Role_ROLE_ASSISTANT, Parts: []*compactorv1.Part{
		{Content: &compactorv1.Part_ToolCall{ToolCall: &compactorv1.ToolCallPart{
			ToolCallId: "c1", ToolName: "bash", InputJson: `{"command":"go test ./..."}`}}}}}
	result := &compactorv1.Message{Role: compactorv1.Role_ROLE_TOOL, Parts: []*compactorv1.Part{
		{Content: &compactorv1.Part_ToolResult{ToolResult: &compactorv1.ToolResultPart{
			ToolCallId: "c1", ToolName: "bash", Output: &compactorv1.ToolOutput{
				Value: &compactorv1.ToolOutput_Text{Text: "--- FAIL: TestParse (0.00s)\nFAIL"}}}}}}}
	msgs := []*compactorv1.Message{
		text(compactorv1.Role_ROLE_USER, "Make the tests in `parse_test.go` pass."),
		call, result,
		text(compactorv1.Role_ROLE_ASSISTANT, "TestParse fails on empty input; fixing parse.go next."),
	}
	summary := ExtractiveSummary(engine.SummaryInput{Messages: msgs}, ExtractiveOptions{MaxTokens: 512})
	fmt.Print(engine.SummaryMessageText(summary, len(msgs), 0))
	// Output:
	// This session continues from an earlier conversation that was compacted to fit the context window. The summary below covers the earlier part of the conversation (4 messages); the messages after this one continue it verbatim.
	//
	// <summary>
	// Sources: [mN] is message N (0-based) of the conversation this summary replaced, [sXXXXXXXX mN] of an earlier one by its source hash prefix; Expand returns them.
	//
	// ## User requests (verbatim)
	// - Make the tests in `parse_test.go` pass. [m0]
	//
	// ## Where it stopped
	// - last action: bash(command=go test ./...) → failed: --- FAIL: TestParse (0.00s) [m1–2]
	// - last intent: TestParse fails on empty input; fixing parse.go next. [m3]
	//
	// ## Files (what was done to each)
	// - parse_test.go: named, not opened [m0]
	// - parse.go: named, not opened [m3]
	// </summary>
	//
	// Continue from where the conversation left off, without asking the user to repeat anything above.
}

// FuzzExtractiveSummary feeds arbitrary anchors (the anchor parser) and message texts: the
// summary never panics, stays within budget and is deterministic.
func FuzzExtractiveSummary(f *testing.F) {
	anchor := ExtractiveSummary(engine.SummaryInput{Messages: []*compactorv1.Message{
		irtest.User("Port `src/a.py` to Go."), irtest.Assistant("Done with src/a.go."),
	}}, ExtractiveOptions{})
	f.Add(anchor, "next request", "answer with `ident` and ./x/y.go", int64(256))
	f.Add("## Earlier summary\nfree text\n- bullet", "", "", int64(64))
	f.Add("## User requests (verbatim)\n  orphan continuation", "é\x00\xff", "```", int64(1))
	f.Add("", "", "", int64(0))
	f.Add("## Errors\n- the harness refused 99999999999999999999 messages of the agent's [s1a2b3c4d m4]\n- the harness refused 2 messages", "Please always provide EXACTLY ONE action in triple backticks, found 2 actions.",
		"THOUGHT: two.\n\n```bash\nsed -i 's/a/b/' x.py\n```\n\n```bash\npython x.py\n```", int64(300))
	f.Fuzz(func(t *testing.T, anchor, user, assistant string, budget int64) {
		if budget > 1<<16 {
			budget = 1 << 16
		}
		in := engine.SummaryInput{Anchor: anchor, Messages: []*compactorv1.Message{
			irtest.User(user),
			irtest.Assistant(assistant, irtest.Call("c1", "read_file", `{"path":"`+strings.ReplaceAll(user, `"`, "")+`"}`)),
			irtest.Result("c1", "read_file", irtest.OutError(assistant)),
			// A text-protocol turn: the assistant's text (commands, when it fences some), and
			// the user's text as what answers it (an observation, a refusal, a request).
			irtest.Assistant(assistant),
			irtest.User(user),
		}}
		opt := ExtractiveOptions{MaxTokens: budget}
		got := ExtractiveSummary(in, opt)
		limit := budget
		if limit <= 0 {
			limit = 2048
		}
		if n := ApproxTokens(got); int64(n) > limit {
			t.Fatalf("summary is %d tokens, budget %d", n, limit)
		}
		if again := ExtractiveSummary(in, opt); again != got {
			t.Fatal("not deterministic")
		}
	})
}

// TestExtractiveSummaryInstructionsAndDemonstrations: instructions are quoted at the top
// within the budget; a few-shot demonstration is not quoted as a request.
func TestExtractiveSummaryInstructionsAndDemonstrations(t *testing.T) {
	user := func(s string) *compactorv1.Message {
		return &compactorv1.Message{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}}}
	}
	msgs := []*compactorv1.Message{
		user("Here is a demonstration of how to correctly accomplish this task.\n--- DEMONSTRATION ---\nDEMO-TASK: fix the other repo\n--- END OF DEMONSTRATION ---"),
		user("Fix the failing parser test in src/parse.py"),
	}
	for _, budget := range []int64{64, 512} {
		s := ExtractiveSummary(engine.SummaryInput{Messages: msgs, Instructions: "Focus on the parser changes."},
			ExtractiveOptions{MaxTokens: budget})
		if !strings.HasPrefix(s, "Instructions for this summary:\n") || !strings.Contains(s, "Focus on the parser changes.") {
			t.Errorf("budget %d: instructions not quoted at the top:\n%s", budget, s)
		}
		if strings.Contains(s, "DEMO-TASK") {
			t.Errorf("budget %d: the demonstration is quoted:\n%s", budget, s)
		}
		if !strings.Contains(s, "Fix the failing parser test") {
			t.Errorf("budget %d: the task is missing:\n%s", budget, s)
		}
		if n := ApproxTokens(s); int64(n) > budget {
			t.Errorf("budget %d: summary has %d tokens", budget, n)
		}
	}
}

func TestFitSummaryPrompt(t *testing.T) {
	f := corpus.Largest(t)
	if f.Format != "openai" {
		t.Skipf("largest corpus file %s is not OpenAI-shaped", f.Name)
	}
	msgs := irtest.ReadOpenAIChat(t, corpus.Read(t, f))
	in := engine.SummaryInput{Messages: msgs, Anchor: "ANCHOR TEXT", Instructions: "INSTRUCTIONS TEXT"}
	full := engine.SummaryPrompt(in, engine.TranscriptOptions{})
	if got := engine.FitSummaryPrompt(in, 0); got != full {
		t.Error("engine.FitSummaryPrompt without a bound differs from engine.SummaryPrompt")
	}
	if got := engine.FitSummaryPrompt(in, len(full)); got != full {
		t.Error("engine.FitSummaryPrompt shrank a prompt that fits")
	}
	first := sumPrefix(sumFirstUserText(msgs), 40)
	for _, limit := range []int{len(full) / 2, 60000, 20000, 5000} {
		got := engine.FitSummaryPrompt(in, limit)
		if len(got) > limit {
			t.Errorf("max %d: prompt is %d bytes", limit, len(got))
		}
		for _, want := range []string{"ANCHOR TEXT", "INSTRUCTIONS TEXT", "<transcript>", "Next step", first} {
			if !strings.Contains(got, want) {
				t.Errorf("max %d: prompt lacks %q", limit, want)
			}
		}
	}
}

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestExtractiveSummaryForTheNextTurn: what the turn after the summary needs is there, said
// as what was done, and nothing is said twice or wrongly.
func TestExtractiveSummaryForTheNextTurn(t *testing.T) {
	task := irtest.User("Fix the empty-string handling in src/marshmallow/fields.py.")
	fields := "def _deserialize(self, value, attr, data):\n    if not value:\n        raise ValueError(msg)\n    return value\n"
	reservation := `{"reservation_id":"ZFA04Y","flights":[{"flight_number":"HAT170","date":"2024-05-17"},{"flight_number":"HAT236","date":"2024-05-18"}],"payment_history":[{"payment_id":"credit_card_4421486","amount":380}]}`
	tests := []struct {
		name             string
		in               engine.SummaryInput
		contains, absent []string
	}{
		{
			name:   "a request kept beside the summary is not quoted in it",
			in:     engine.SummaryInput{Messages: []*compactorv1.Message{task, irtest.Assistant("Reading it.")}, Kept: []*compactorv1.Message{task}},
			absent: []string{"## User requests", "empty-string handling"},
		},
		{
			name: "success and failure come from the outcome, not from words in a file the agent read",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				task,
				irtest.Assistant("", irtest.Call("o1", "open", `{"path":"src/marshmallow/fields.py"}`)),
				irtest.Result("o1", "open", irtest.OutText(fields)),
				irtest.Assistant("", irtest.Call("e1", "edit", `{"path":"src/marshmallow/fields.py","old_str":"if not value:","new_str":"if value == \"\":\n        return EMPTY_VALUE"}`)),
				irtest.Result("e1", "edit", irtest.OutText("File updated.")),
				irtest.Assistant("", irtest.Call("r1", "bash", `{"command":"python reproduce.py"}`)),
				irtest.Result("r1", "bash", irtest.OutText("None")),
			}},
			contains: []string{"- src/marshmallow/fields.py: read, edited; last edit wrote `if value == \"\":`, `return EMPTY_VALUE`; then bash(command=python reproduce.py) → None", "→ None"},
			absent:   []string{"(failed)", "## Errors"},
		},
		{
			name: "a file the agent created, by its bare name, with what it holds, and its run",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				task,
				irtest.Assistant("THOUGHT: reproduce.\n\n```bash\ncat <<'EOF' > reproduce_issue.py\nfrom marshmallow import fields\nprint(fields.String().deserialize(\"\"))\nEOF\n```"),
				irtest.User("<returncode>0</returncode>\n<output>\n</output>"),
				irtest.Assistant("THOUGHT: run it.\n\n```bash\npython reproduce_issue.py\n```"),
				irtest.User("<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\nValueError: empty\n</output>"),
			}},
			contains: []string{"- reproduce_issue.py: written, ran (failed); last edit wrote `from marshmallow import fields`", "fields.String", "ran (failed)", "ValueError: empty"},
		},
		{
			name: "values an output gave that the agent passed to a later call are kept",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				irtest.User("Change my flights to the next day."),
				irtest.Assistant("", irtest.Call("g1", "get_reservation_details", `{"reservation_id":"ZFA04Y"}`)),
				irtest.Result("g1", "get_reservation_details", irtest.OutText(reservation)),
				irtest.Assistant("", irtest.Call("u1", "update_reservation_flights", `{"reservation_id":"ZFA04Y","flights":[{"flight_number":"HAT170","date":"2024-05-18"}],"payment_id":"credit_card_4421486"}`)),
				irtest.Result("u1", "update_reservation_flights", irtest.OutText(`{"status":"ok"}`)),
			}},
			contains: []string{"HAT170", "credit_card_4421486", "ZFA04Y"},
		},
		{
			name: "a record filed under an id stays whole, the id with it",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				irtest.User("Book it with my Visa."),
				irtest.Assistant("", irtest.Call("g1", "get_user_details", `{"user_id":"noah_muller_9847"}`)),
				irtest.Result("g1", "get_user_details", irtest.OutText(`{"payment_methods":{"credit_card_6040264":{"brand":"visa","last_four":"2076"}},"membership":"gold"}`)),
			}},
			contains: []string{"credit_card_6040264: brand=visa, last_four=2076", "membership=gold"},
		},
		{
			name: "a tool answering 'Error:' failed, and the call is stated with every argument to make again",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				irtest.User("Book HAT082 and HAT025 for three."),
				irtest.Assistant("", irtest.Call("b1", "book_reservation", `{"user_id":"noah_muller_9847","origin":"SFO","destination":"JFK","flight_type":"one_way","cabin":"economy","flights":[{"flight_number":"HAT082","date":"2024-05-17"}],"payment_methods":[{"payment_id":"credit_card_6040264","amount":957}]}`)),
				irtest.Result("b1", "book_reservation", irtest.OutText("Error: payment amount does not add up, total price is 1002, but paid 957")),
			}},
			contains: []string{"flight_type=one_way", `"flight_number":"HAT082"`, `"payment_id":"credit_card_6040264"`,
				"→ failed: Error: payment amount does not add up, total price is 1002, but paid 957"},
		},
		{
			name: "a file written whole states what it exports before its implementations and tests",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				irtest.User("Port math_utils to Rust."),
				irtest.Assistant("", irtest.Call("w1", "Write", `{"file_path":"src/math_utils.rs","content":"use std::fmt;\n\n#[cfg(test)]\nmod tests {\nfn test_factorial() {}\n}\nimpl fmt::Display for NegativeInputError {}\nfn helper() {}\npub struct NegativeInputError;\npub fn factorial(n: i64) -> u64 { 1 }\n"}`)),
				irtest.Result("w1", "Write", irtest.OutText("File created successfully at: src/math_utils.rs")),
			}},
			contains: []string{"- src/math_utils.rs: written; it defines `pub struct NegativeInputError;`, `pub fn factorial(n: i64) -> u64 { 1 }`, `fn helper() {}`, `impl fmt::Display for NegativeInputError {}`, `fn test_factorial() {}`"},
		},
		{
			name: "a crate root written whole states the modules it declares, not its doc comments",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				irtest.User("Port the project to Rust."),
				irtest.Assistant("", irtest.Call("w1", "Write", `{"file_path":"src/lib.rs","content":"//! Utils - a Rust port.\n//!\n//! Strings and math.\n\npub mod math_utils;\npub mod string_utils;\n"}`)),
				irtest.Result("w1", "Write", irtest.OutText("File created successfully at: src/lib.rs")),
			}},
			contains: []string{"- src/lib.rs: written; it defines `pub mod math_utils;`, `pub mod string_utils;`"},
			absent:   []string{"`//!"},
		},
		{
			name: "an edit states the code it wrote before its comments, and only comments when that is all it wrote",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				irtest.User("Fix the empty string case and document the helper."),
				irtest.Assistant("", irtest.Call("e1", "Edit", `{"file_path":"src/fields.py","old_string":"x","new_string":"# An empty string is no value:\n# return the marker.\nif value == \"\":\n    return EMPTY_VALUE"}`)),
				irtest.Result("e1", "Edit", irtest.OutText("The file src/fields.py has been updated successfully.")),
				irtest.Assistant("", irtest.Call("e2", "Edit", `{"file_path":"src/helper.rs","old_string":"y","new_string":"/// Returns the marker.\n#[inline]\nfn marker() {}"}`)),
				irtest.Result("e2", "Edit", irtest.OutText("The file src/helper.rs has been updated successfully.")),
				irtest.Assistant("", irtest.Call("e3", "Edit", `{"file_path":"src/notes.py","old_string":"z","new_string":"# TODO: handle None too"}`)),
				irtest.Result("e3", "Edit", irtest.OutText("The file src/notes.py has been updated successfully.")),
				irtest.Assistant("", irtest.Call("e4", "Edit", `{"file_path":"README.md","old_string":"w","new_string":"# Usage\nRun it."}`)),
				irtest.Result("e4", "Edit", irtest.OutText("The file README.md has been updated successfully.")),
			}},
			contains: []string{"- src/fields.py: edited; last edit wrote `if value == \"\":`, `return EMPTY_VALUE`",
				"- src/helper.rs: edited; last edit wrote `#[inline]`, `fn marker() {}`",
				"- src/notes.py: edited; last edit wrote `# TODO: handle None too`",
				"- README.md: edited; last edit wrote `# Usage`, `Run it.`"},
			absent: []string{"`# An empty string", "`/// Returns"},
		},
		{
			name: "an excerpt leaves out lines without a word: rules, fences, closing braces",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				irtest.User("Find the handlers."),
				irtest.Assistant("", irtest.Call("g1", "Grep", `{"pattern":"def handle"}`)),
				irtest.Result("g1", "Grep", irtest.OutText("Found the handlers:\n---\n```\napp/views.py:12: def handle_get(request):\n}\n```")),
			}},
			contains: []string{"→ Found the handlers: / app/views.py:12: def handle_get(request):"},
			absent:   []string{"/ ---", "/ ```", "/ }"},
		},
		{
			name: "a C directive written with a space after its # is code, not a comment",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				irtest.User("Enable X when the platform has it."),
				irtest.Assistant("", irtest.Call("e1", "Edit", `{"file_path":"src/config.h","old_string":"x","new_string":"#ifdef HAVE_X\n# define USE_X 1\n#endif"}`)),
				irtest.Result("e1", "Edit", irtest.OutText("The file src/config.h has been updated successfully.")),
			}},
			contains: []string{"last edit wrote `#ifdef HAVE_X`, `# define USE_X 1`, `#endif`"},
		},
		{
			name: "a note that introduces what follows keeps the start of it",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				task,
				irtest.Assistant("THOUGHT: The issue seems to be in line 1950:\n\n```python\ndata = PandasIndexAdapter(self._data.array.copy(deep=True))\n```\n\nIt loses the dtype."),
				irtest.Assistant("Next I will fix it."),
			}},
			contains: []string{"- The issue seems to be in line 1950: ```python data = PandasIndexAdapter(self._data.array.copy(deep=True))"},
		},
		{
			name: "the latest plan, in full",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				task,
				irtest.Assistant("", irtest.Call("t1", "TodoWrite", `{"todos":[{"content":"Read fields.py","status":"in_progress"}]}`)),
				irtest.Result("t1", "TodoWrite", irtest.OutText("ok")),
				irtest.Assistant("", irtest.Call("t2", "TodoWrite", `{"todos":[{"content":"Read fields.py","status":"completed"},{"content":"Return None for empty strings","status":"in_progress"},{"content":"Run the test suite","status":"pending"}]}`)),
				irtest.Result("t2", "TodoWrite", irtest.OutText("ok")),
			}},
			contains: []string{"## Plan (latest state)\n- [completed] Read fields.py\n- [in_progress] Return None for empty strings\n- [pending] Run the test suite\n"},
			absent:   []string{"[in_progress] Read fields.py"},
		},
		{
			name: "grep finding nothing is an answer, not an error",
			in: engine.SummaryInput{Messages: []*compactorv1.Message{
				task,
				irtest.Assistant("```bash\ngrep -n \"__file__\" django/core/management/commands/migrate.py\n```"),
				irtest.User("<returncode>1</returncode>\n<output>\n</output>"),
				irtest.Assistant("Not there."),
			}},
			contains: []string{"→ no matches"},
			absent:   []string{"## Errors", "(failed)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ExtractiveSummary(tt.in, ExtractiveOptions{MaxTokens: 2048})
			checkHasLacks(t, got, tt.contains, tt.absent)
			if bare, lines := fidelity.BareLines(got); bare > 0 {
				t.Errorf("%d of %d lines state only a name:\n%s", bare, lines, got)
			}
		})
	}
}

// checkHasLacks fails t for each string of has the summary lacks and each of lacks it holds.
// citeSuffix matches the citation ending a line, with the space before it.
var citeSuffix = regexp.MustCompile(`(?: \[(?:s[0-9a-f]{8,64} )?m\d+(?:–\d+)?\])+\n`)

// checkHasLacks checks that got has each of has and none of lacks, its lines' citations
// left out (checkCited checks those).
func checkHasLacks(t *testing.T, got string, has, lacks []string) {
	t.Helper()
	got = citeSuffix.ReplaceAllString(got+"\n", "\n")
	for _, s := range has {
		if !strings.Contains(got, s) {
			t.Errorf("summary lacks %q:\n%s", s, got)
		}
	}
	for _, s := range lacks {
		if strings.Contains(got, s) {
			t.Errorf("summary has %q:\n%s", s, got)
		}
	}
}

// checkCited checks that every item of a summary of n messages ends with a citation of
// messages in range, and that the summary states once what citations mean.
func checkCited(t *testing.T, got string, n int) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	cited := 0
	for i, l := range lines {
		last := i+1 == len(lines) || lines[i+1] == "" || strings.HasPrefix(lines[i+1], "- ") || strings.HasPrefix(lines[i+1], "## ")
		inItem := strings.HasPrefix(l, "- ") || strings.HasPrefix(l, "  ")
		if !inItem || !last {
			continue
		}
		rest, cs := engine.CutCitations(l)
		if len(cs) == 0 || rest == l {
			t.Errorf("item line %q ends with no citation", l)
			continue
		}
		cited++
		for _, c := range cs {
			if c.Source == "" && (c.Range.First < 0 || c.Range.Last >= n) {
				t.Errorf("%q cites %v, outside the %d messages", l, c, n)
			}
		}
	}
	if k := strings.Count(got, engine.CitationLegend); k > 1 || cited > 0 && len(got) > 4*len(engine.CitationLegend)*legendShare && k != 1 {
		t.Errorf("the summary states the legend of citations %d times", strings.Count(got, engine.CitationLegend))
	}
}

// TestUnlabeled: the label a harness opens the agent's text with is not part of its words.
func TestUnlabeled(t *testing.T) {
	tests := []struct{ in, want string }{
		{"THOUGHT: The bug is in parse.py.", "The bug is in parse.py."},
		{"DISCUSSION\nThe test passes now.", "The test passes now."},
		{"The THOUGHT: label only opens a text.", "The THOUGHT: label only opens a text."},
		{"  I will read the file.\n", "  I will read the file.\n"},
	}
	for _, tt := range tests {
		if got := unlabeled(tt.in); got != tt.want {
			t.Errorf("unlabeled(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestSummaryCarriesASubAgentsReport: a call that hands another agent its instructions (a
// prompt of a sentence or more, no file or command: Claude Code's Task) is answered by that
// agent's report, whose lines are findings: the summary carries them even when the agent's
// own reads and edits compete for the room, while a call whose prompt is a short query is an
// ordinary call.
func TestSummaryCarriesASubAgentsReport(t *testing.T) {
	report := strings.Join([]string{"I explored the project. Here is what you need to port it:",
		"- src/strings.py defines reverse_string(s) and is tested by tests/test_strings.py",
		"- src/mathx.py defines factorial(n), which raises NegativeInputError below zero",
		"- src/valid.py defines is_valid_email(email); it rejects user@nodot and user@@double.com",
		"- coverage must stay at 100% (fail_under = 100 in pyproject.toml)"}, "\n")
	delegate := `{"description":"Explore the project","prompt":"Explore this Python project thoroughly and tell me every module, function, error type and test so that I can port it to Rust.","subagent_type":"Explore"}`
	query := `{"description":"find it","prompt":"where is factorial defined?"}`
	for _, tc := range []struct {
		name, input string
		carried     bool
	}{
		{"a sub-agent's report", delegate, true},
		{"a short query", query, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := []*compactorv1.Message{irtest.User("Port this Python project to Rust and keep 100% coverage."),
				irtest.Assistant("", irtest.Call("t1", "Task", tc.input)), irtest.Result("t1", "Task", irtest.OutText(report))}
			for i := range 6 {
				id := fmt.Sprintf("r%d", i)
				msgs = append(msgs, irtest.Assistant("", irtest.Call(id, "Write", fmt.Sprintf(`{"file_path":"src/m%d.rs","content":"pub fn f%d() {}\n"}`, i, i))),
					irtest.Result(id, "Write", irtest.OutText(fmt.Sprintf("File created successfully at: src/m%d.rs", i))))
			}
			// A budget the report and the writes compete for (with room left, any output's
			// longer excerpt is shown: TestRoomLeftShowsMore).
			got := ExtractiveSummary(engine.SummaryInput{Messages: msgs}, ExtractiveOptions{MaxTokens: 400})
			kept := 0
			for _, name := range []string{"reverse_string", "NegativeInputError", "is_valid_email", "fail_under"} {
				if strings.Contains(got, name) {
					kept++
				}
			}
			if tc.carried && kept < 3 {
				t.Errorf("the report's findings kept: %d of 4\n%s", kept, got)
			}
			// The report is named by the task's description; what the sub-agent was told is
			// not repeated (its report says more).
			if tc.carried && (!strings.Contains(got, "Task(description=Explore the project, subagent_type=Explore, …)") || strings.Contains(got, "thoroughly")) {
				t.Errorf("the delegated call is not named by its description alone\n%s", got)
			}
			if !tc.carried && kept > 1 {
				t.Errorf("a short query's output carried as a report: %d of 4 findings\n%s", kept, got)
			}
		})
	}
}

// TestLongSubAgentReportDoesNotCrowdOut: a sub-agent's report of many short lines counts as a
// few findings, not one per line: in a small summary it does not push out the errors and the
// user's constraints, and at a small budget it is still excerpted, not dropped.
func TestLongSubAgentReportDoesNotCrowdOut(t *testing.T) {
	var lines []string
	for i := range 120 {
		lines = append(lines, fmt.Sprintf("- pkg/m%03d.py: ok", i))
	}
	delegate := `{"description":"Explore the project","prompt":"Explore this Python project thoroughly and tell me every module, function, error type and test so that I can port it to Rust."}`
	msgs := []*compactorv1.Message{irtest.User("Port this Python project to Rust and keep 100% coverage.")}
	for i := range 5 {
		id := fmt.Sprintf("b%d", i)
		msgs = append(msgs,
			irtest.Assistant("", irtest.Call(id, "Bash", fmt.Sprintf(`{"command":"cargo build -p crate%d","description":"build"}`, i))),
			irtest.Result(id, "Bash", irtest.OutError(fmt.Sprintf("error[E05%02d]: no method named `split_%d` found for struct `Lines%d`", i, i, i))),
			irtest.User(fmt.Sprintf("Constraint %d: keep flag --opt%d behaving exactly as in Python.", i, i)))
	}
	msgs = append(msgs, irtest.Assistant("", irtest.Call("t1", "Task", delegate)), irtest.Result("t1", "Task", irtest.OutText(strings.Join(lines, "\n"))),
		irtest.Assistant("", irtest.Call("bz", "Bash", `{"command":"cargo test","description":"run tests"}`)),
		irtest.Result("bz", "Bash", irtest.OutError("error[E0425]: cannot find function `parse_header` in module `wc`")),
		irtest.User("Latest: fix parse_header first."))
	for _, budget := range []int64{400, 700, 800} {
		got := ExtractiveSummary(engine.SummaryInput{Messages: msgs}, ExtractiveOptions{MaxTokens: budget})
		if n := strings.Count(got, "Constraint "); n < 5 {
			t.Errorf("budget %d: %d of 5 constraints kept\n%s", budget, n, got)
		}
		if budget >= 700 && strings.Count(got, "error[E05") < 5 {
			t.Errorf("budget %d: errors crowded out\n%s", budget, got)
		}
		if !strings.Contains(got, ".py: ok") {
			t.Errorf("budget %d: the report is dropped\n%s", budget, got)
		}
	}
}

// TestCommentLines: what an edit statement takes for a comment, by the file's language; never
// a line of code (a C directive, a Python line broken before its operator, a Rust attribute).
func TestCommentLines(t *testing.T) {
	for _, tt := range []struct {
		path, line string
		want       bool
	}{
		{"src/lib.rs", "//! The crate.", true},
		{"src/lib.rs", "/// Returns it.", true},
		{"src/lib.rs", "#[derive(Debug)]", false},
		{"src/lib.rs", "#![allow(dead_code)]", false},
		{"src/a.c", "/* a block", true},
		{"src/a.c", "* its second line", true},
		{"src/a.c", "*", true},
		{"src/a.c", "*/", true},
		{"src/a.h", "# define USE_X 1", false},
		{"src/a.h", "# include <stdio.h>", false},
		{"src/a.h", "#ifdef HAVE_X", false},
		{"src/a.c", "*p = 0;", false},
		{"app.py", "# a note", true},
		{"app.py", "#!/usr/bin/env python3", true},
		{"app.py", "* quantity", false},
		{"app.py", "// batch_size", false},
		{"app.py", "@dataclass", false},
		{"config.yaml", "# the port", true},
		{"README.md", "# Usage", false},
		{"CMakeLists.txt", "# build it", false},
		{"Makefile", "# the default target", false},
		{"https.go", "//example.com/x is taken for a comment", true},
	} {
		if got := comment(tt.line, commentsOf(tt.path)); got != tt.want {
			t.Errorf("comment(%q) in %s = %v, want %v", tt.line, tt.path, got, tt.want)
		}
	}
}

// TestDelegatedCallNames: a delegated call's report line names it by its other arguments, but
// a call with no other argument, and a call still waiting for its report, keep the
// instructions: nothing else says what the other agent was asked.
func TestDelegatedCallNames(t *testing.T) {
	const prompt = "Explore src/parser.py and tests/test_parser.py thoroughly and report why test_empty_input fails with an IndexError."
	sum := func(msgs ...*compactorv1.Message) string {
		return ExtractiveSummary(engine.SummaryInput{Messages: msgs}, ExtractiveOptions{})
	}
	got := sum(irtest.User("Fix the failing parser test."),
		irtest.Assistant("", irtest.Call("t1", "dispatch_agent", `{"prompt":"`+prompt+`"}`)),
		irtest.Result("t1", "dispatch_agent", irtest.OutText("The tokenizer drops the last token when the input is empty.")))
	checkHasLacks(t, got, []string{"dispatch_agent(prompt=Explore src/parser.py"}, []string{"dispatch_agent(…)"})
	got = sum(irtest.User("Fix the failing parser test."),
		irtest.Assistant("", irtest.Call("t1", "Task", `{"description":"Investigate failure","prompt":"`+prompt+`","subagent_type":"general-purpose"}`)))
	checkHasLacks(t, got, []string{"waiting for the result of: Task(description=Investigate failure, prompt=Explore src/parser.py"}, nil)
}

// TestExcerptLayoutLines: an output that is layout alone is quoted as it is ("[]" is an
// answer), and a diff's added brace is a change, not layout.
func TestExcerptLayoutLines(t *testing.T) {
	for _, tt := range []struct{ out, want string }{
		{"[]\n", "→ []"}, {"{}\n", "→ {}"}, {"---\n", "→ ---"},
		{"diff --git a/main.go b/main.go\n--- a/main.go\n+++ b/main.go\n@@ -10,3 +10,4 @@ func main() {\n \tfmt.Println(x)\n+}\n", "/ +}"},
	} {
		got := ExtractiveSummary(engine.SummaryInput{Messages: []*compactorv1.Message{irtest.User("Run it."),
			irtest.Assistant("", irtest.Call("b1", "Bash", `{"command":"python run.py"}`)),
			irtest.Result("b1", "Bash", irtest.OutText(tt.out))}}, ExtractiveOptions{})
		checkHasLacks(t, got, []string{tt.want}, nil)
	}
}

// TestOnlyTheLatestCommandsWait: a text-protocol agent's message with two commands gets one
// observation (mini-swe-agent refuses both with a format error); neither is still waiting
// for a result once the agent writes again, and only the newest message's command is.
func TestOnlyTheLatestCommandsWait(t *testing.T) {
	got := ExtractiveSummary(engine.SummaryInput{Messages: []*compactorv1.Message{
		irtest.User("Make the docs render `bytes | str`."),
		irtest.Assistant("THOUGHT: change it and rebuild.\n\n```bash\nsed -i 's/bytes | str/str/' example.py\n```\n\n```bash\ncd reproduction && make html\n```"),
		irtest.User("Please always provide EXACTLY ONE action in triple backticks, found 2 actions."),
		irtest.Assistant("THOUGHT: one at a time.\n\n```bash\ncd reproduction && make html\n```"),
		irtest.User("<returncode>0</returncode>\n<output>\nbuild succeeded.\n</output>"),
		irtest.Assistant("THOUGHT: check the page.\n\n```bash\ngrep -c str _build/html/index.html\n```"),
	}}, ExtractiveOptions{})
	checkHasLacks(t, got, []string{"waiting for the result of: `grep -c str _build/html/index.html`", "build succeeded"},
		[]string{"waiting for the result of: `sed", "waiting for the result of: `cd reproduction"})
	if n := strings.Count(got, "waiting for the result of"); n != 1 {
		t.Errorf("%d commands waiting for a result, want 1:\n%s", n, got)
	}
}

// TestRefusedCommands: mini-swe-agent refuses a message of several commands (its format
// error) and runs none: the summary says the command was refused, not run, writes no edit of
// it into the files ledger, and counts the refusals in one errors line, which the next summary
// adds its own to.
func TestRefusedCommands(t *testing.T) {
	const refusal = "Please always provide EXACTLY ONE action in triple backticks, found 2 actions.\n\nPlease format your action in triple backticks as shown in <response_example>."
	msgs := []*compactorv1.Message{
		irtest.User("Reject URLs with newlines in django/core/validators.py."),
		irtest.Assistant("THOUGHT: read it.\n\n```bash\nsed -n '110,120p' django/core/validators.py\n```"),
		irtest.User("<returncode>0</returncode>\n<output>\n        if value:\n</output>"),
		irtest.Assistant("THOUGHT: patch and check.\n\n```bash\nsed -i '114a\\    raise e' django/core/validators.py\n```\n\n```bash\npython -m pytest tests/validators\n```"),
		irtest.User(refusal),
		irtest.Assistant("THOUGHT: one block, then.\n\n```bash\nsed -i '114a\\    raise e' django/core/validators.py\nsed -n '114,115p' django/core/validators.py\n```"),
		irtest.User(refusal),
	}
	got := ExtractiveSummary(engine.SummaryInput{Messages: msgs}, ExtractiveOptions{MaxTokens: 2048})
	checkHasLacks(t, got, []string{
		"→ refused by the harness, not run: Please always provide EXACTLY ONE action in triple backticks, found 2 actions.",
		"- the harness refused 2 messages of the agent's (no command of theirs ran); the latest: Please always provide EXACTLY ONE action",
		"- django/core/validators.py: read",
	}, []string{"edited", "last edit wrote", "waiting for the result of", "tests/validators` →"})

	// The next summary counts the earlier refusals with its own, in one line.
	again := ExtractiveSummary(engine.SummaryInput{Anchor: engine.QualifyCitations(got, strings.Repeat("ab", 32)), Messages: []*compactorv1.Message{
		irtest.Assistant("THOUGHT: a script instead.\n\n```bash\nprintf 'x' > patch.py && python patch.py\n```"),
		irtest.User(refusal),
	}}, ExtractiveOptions{MaxTokens: 2048})
	checkHasLacks(t, again, []string{"- the harness refused 3 messages of the agent's (no command of theirs ran); the latest:"}, nil)
	if n := strings.Count(again, "the harness refused"); n != 1 {
		t.Errorf("%d lines count refusals, want 1:\n%s", n, again)
	}
}

// TestRefusalsAcrossSummaries: a refusal that opens a range answers the command an earlier
// summary said was waiting (refused, so no longer waiting); the count an earlier summary
// carried keeps its latest words when the range adds none; a line in another summarizer's
// words that starts the same way stays as it is; a count past the bound is no count.
func TestRefusalsAcrossSummaries(t *testing.T) {
	const refusal = "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."
	anchor := func(s string) string { return engine.QualifyCitations(s, strings.Repeat("ab", 32)) }
	first := ExtractiveSummary(engine.SummaryInput{Messages: []*compactorv1.Message{
		irtest.User("Reject URLs with newlines in django/core/validators.py."),
		irtest.Assistant("THOUGHT: patch it.\n\n```bash\nsed -i '114a\\    raise e' django/core/validators.py\n```"),
	}}, ExtractiveOptions{MaxTokens: 2048})
	checkHasLacks(t, first, []string{"waiting for the result of: `sed -i"}, nil)
	got := ExtractiveSummary(engine.SummaryInput{Anchor: anchor(first), Messages: []*compactorv1.Message{irtest.User(refusal)}},
		ExtractiveOptions{MaxTokens: 2048})
	checkHasLacks(t, got, []string{"- last action: `sed -i '114a\\ raise e' django/core/validators.py` [sabababab m1] → refused by the harness, not run: " + refusal,
		"the harness refused 1 message of the agent's (no command of theirs ran); the latest: " + refusal}, []string{"waiting for the result of"})

	// The next range adds no refusal: the count and its latest words stay.
	again := ExtractiveSummary(engine.SummaryInput{Anchor: anchor(got), Messages: []*compactorv1.Message{
		irtest.Assistant("THOUGHT: one line.\n\n```bash\ngrep -n 'if value' django/core/validators.py\n```"),
		irtest.User("<returncode>0</returncode>\n<output>\n114:        if value:\n</output>"),
	}}, ExtractiveOptions{MaxTokens: 2048})
	checkHasLacks(t, again, []string{"- the harness refused 1 message of the agent's (no command of theirs ran); the latest: " + refusal + "\n"}, nil)

	for _, line := range []string{
		"- the harness refused 1 command: `rm -rf /srv/data` was blocked by the sandbox policy; use a temp dir instead",
		"- the harness refused 9223372036854775807 messages of the agent's (no command of theirs ran)",
	} {
		got := ExtractiveSummary(engine.SummaryInput{Anchor: "## Errors\n" + line + "\n", Messages: []*compactorv1.Message{
			irtest.Assistant("THOUGHT: again.\n\n```bash\nls\n```"), irtest.User(refusal)}}, ExtractiveOptions{MaxTokens: 2048})
		checkHasLacks(t, got, []string{line, "- the harness refused 1 message of the agent's"}, nil)
	}
}

// TestNotesLeaveCommandsToCalls: a text-protocol agent's shell block is its command, which
// the calls state; the long form of its note keeps what it said around the block, not the
// block again. A code block a chat's assistant writes for a person stays in its note.
func TestNotesLeaveCommandsToCalls(t *testing.T) {
	msgs := []*compactorv1.Message{
		irtest.User("Stop collecting random __init__.py files."),
		irtest.Assistant("THOUGHT: I'll write a reproduction.\n\n```bash\ncat <<'EOF' > repro.sh\nmkdir -p foobar\nEOF\n```\n\nThen run it."),
		irtest.User("<returncode>0</returncode>\n<output>\n</output>"),
		irtest.User("How do I count words in Python?"),
		irtest.Assistant("Like this:\n\n```python\nlen(text.split())\n```\n\nor with a regexp."),
		irtest.User("Thanks."),
	}
	pos := make([]int, len(msgs))
	for i := range pos {
		pos[i] = i
	}
	x := newExtractor(nil, nil)
	x.walk(msgs, pos, false)
	x.buildNotes()
	var notes []string
	for _, it := range x.items {
		notes = append(notes, it.text)
	}
	got := strings.Join(notes, "\n")
	checkHasLacks(t, got, []string{"- I'll write a reproduction. Then run it.", "- Like this: ```python len(text.split()) ``` or with a regexp."}, []string{"```bash", "mkdir"})
}

func TestWithoutCommands(t *testing.T) {
	for _, tt := range []struct {
		in   string
		cmds []string
		want string
	}{
		{"a\n```bash\nls\n```\nb", []string{"ls"}, "a\n\nb"},
		{"a\n```\nls -la\n```", []string{"ls -la"}, "a\n"},
		{"a\n```python\nx = 1\n```\nb", []string{"ls"}, "a\n```python\nx = 1\n```\nb"},
		{"a\n```bash\nls\n```\n```bash\npwd\n```", []string{"pwd"}, "a\n```bash\nls\n```\n"},
		{"a\n```sh\nls\n", []string{"ls"}, "a\n"},
		{"```go\nx\n", nil, "```go\nx\n"},
	} {
		if got := withoutCommands(tt.in, tt.cmds); got != tt.want {
			t.Errorf("withoutCommands(%q, %q) = %q, want %q", tt.in, tt.cmds, got, tt.want)
		}
	}
}

// TestPendingCommandWhole: the command whose output the kept messages open with is said
// whole when the room allows (nothing else shows what produced that output), cut when it
// does not; the next summary, reading it as answered, names it as shortly as any call.
func TestPendingCommandWhole(t *testing.T) {
	var script strings.Builder
	script.WriteString("cat <<'EOF' > reproduce_issue.py\nfrom django.db.models import Case, Exists, Func\n")
	for _, name := range []string{"Case", "Exists", "Func", "OrderBy", "OuterRef", "RowRange", "Subquery", "Value", "ValueRange", "When", "Window", "WindowFrame"} {
		fmt.Fprintf(&script, "check_deconstruct(%s, 'django.db.models.%s')\n", name, name)
	}
	script.WriteString("EOF\npython reproduce_issue.py")
	msgs := []*compactorv1.Message{
		irtest.User("Use simplified paths for deconstruct of expressions."),
		irtest.Assistant("THOUGHT: read it.\n\n```bash\ngrep -n deconstructible django/db/models/expressions.py\n```"),
		irtest.User("<returncode>0</returncode>\n<output>\n393:@deconstructible\n</output>"),
		irtest.Assistant("THOUGHT: Let's verify this behavior with a reproduction script.\n\n```bash\n" + script.String() + "\n```"),
	}
	whole := ExtractiveSummary(engine.SummaryInput{Messages: msgs}, ExtractiveOptions{MaxTokens: 2048})
	checkHasLacks(t, whole, []string{"- waiting for the result of: `cat <<'EOF' > reproduce_issue.py from django.db.models import Case, Exists, Func check_deconstruct(Case, 'django.db.models.Case')",
		"check_deconstruct(WindowFrame, 'django.db.models.WindowFrame') EOF python reproduce_issue.py`"}, []string{"bytes omitted"})

	cut := ExtractiveSummary(engine.SummaryInput{Messages: msgs}, ExtractiveOptions{MaxTokens: 200})
	checkHasLacks(t, cut, []string{"- waiting for the result of: `cat <<'EOF' > reproduce_issue.py", "bytes omitted"}, nil)

	next := ExtractiveSummary(engine.SummaryInput{Anchor: engine.QualifyCitations(whole, strings.Repeat("ab", 32)), Messages: []*compactorv1.Message{
		irtest.User("<returncode>0</returncode>\n<output>\nOK\n</output>"),
		irtest.Assistant("THOUGHT: fine.\n\n```bash\nls\n```"),
	}}, ExtractiveOptions{MaxTokens: 2048})
	checkHasLacks(t, next, []string{"- last action: `cat <<'EOF' > reproduce_issue.py", "bytes omitted] … .models.WindowFrame') EOF python reproduce_issue.py` [sabababab m3] → OK"},
		[]string{"waiting for the result of: `cat"})

	// Failed, it is the script the next turn fixes: said whole too, and cut, not dropped,
	// where the room is small.
	failed := append(msgs, irtest.User("<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\nNameError: name 'check_deconstruct' is not defined\n</output>"))
	got := ExtractiveSummary(engine.SummaryInput{Messages: failed}, ExtractiveOptions{MaxTokens: 2048})
	checkHasLacks(t, got, []string{"- last action: `cat <<'EOF' > reproduce_issue.py from django.db.models import Case, Exists, Func check_deconstruct(Case, 'django.db.models.Case')",
		"EOF python reproduce_issue.py` → failed: NameError: name 'check_deconstruct' is not defined"}, []string{"bytes omitted"})
	for _, n := range []int64{200, 300, 400} {
		got := ExtractiveSummary(engine.SummaryInput{Messages: failed}, ExtractiveOptions{MaxTokens: n})
		checkHasLacks(t, got, []string{"- last action: `cat <<'EOF' > reproduce_issue.py", "NameError"}, nil)
	}
}

// TestARunSaidOnce: the run after edits is said on the line of the file edited last and of
// those its command names (a whole word: test_utils.py does not name utils.py); an edit that
// wrote nothing (a sed deleting lines) does not take it from the file edited before.
func TestARunSaidOnce(t *testing.T) {
	write := func(id, file, body string) []*compactorv1.Message {
		cmd, _ := json.Marshal(map[string]string{"command": "cat <<'EOF' > " + file + "\n" + body + "\nEOF"})
		return []*compactorv1.Message{
			irtest.Assistant("", irtest.Call(id, "bash", string(cmd))),
			irtest.Result(id, "bash", irtest.OutText("")),
		}
	}
	run := func(cmd string) []*compactorv1.Message {
		return []*compactorv1.Message{
			irtest.Assistant("", irtest.Call("r1", "bash", `{"command":"`+cmd+`"}`)),
			irtest.Result("r1", "bash", irtest.OutText("1 passed in 0.01s")),
			irtest.Assistant("", irtest.Call("l1", "bash", `{"command":"ls /tmp"}`)),
		}
	}
	conv := func(parts ...[]*compactorv1.Message) []*compactorv1.Message {
		msgs := []*compactorv1.Message{irtest.User("Fix parse in utils.py.")}
		for _, p := range parts {
			msgs = append(msgs, p...)
		}
		return msgs
	}
	tests := []struct {
		name       string
		msgs       []*compactorv1.Message
		want, lack string
	}{
		{"a module, then its test, then the test run", conv(write("w1", "utils.py", "def parse(s):\n    return s.strip()"),
			write("w2", "test_utils.py", "def test_parse():\n    assert parse(' a ') == 'a'"), run("python -m pytest test_utils.py -q")),
			"- utils.py: written; it defines `def parse(s)`\n- test_utils.py: written, tested; it defines `def test_parse()`; then bash(command=python -m pytest test_utils.py -q) → 1 passed in 0.01s\n", ""},
		{"an edit that wrote nothing between", conv(write("w1", "utils.py", "def parse(s):\n    return s.strip()"),
			[]*compactorv1.Message{
				irtest.Assistant("", irtest.Call("w2", "bash", `{"command":"sed -i '/print(/d' conf.py"}`)),
				irtest.Result("w2", "bash", irtest.OutText("")),
			}, run("python -m pytest -q")),
			"- utils.py: written; it defines `def parse(s)`; then bash(command=python -m pytest -q) → 1 passed in 0.01s", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ExtractiveSummary(engine.SummaryInput{Messages: tt.msgs}, ExtractiveOptions{MaxTokens: 4096})
			var lacks []string
			if tt.lack != "" {
				lacks = []string{tt.lack}
			}
			checkHasLacks(t, got, []string{tt.want}, lacks)
		})
	}
}

// TestMentionsSkipGlobs: a glob pattern the agent writes names no file, so the ledger gets
// no line for a piece of it (pytest-6197's summaries had "_test.py: named, not opened"
// from "`test_*.py` or `*_test.py`"), while the paths beside it are recorded.
func TestMentionsSkipGlobs(t *testing.T) {
	for _, text := range []string{
		"It does not match python_files, which default to `test_*.py` or `*_test.py`; see src/_pytest/python.py.",
		"The conftest files (src/**/conftest.py, *.cfg) are read by src/_pytest/python.py.",
	} {
		got := ExtractiveSummary(engine.SummaryInput{Messages: []*compactorv1.Message{
			irtest.User("Fix the collection of __init__.py files."),
			irtest.Assistant(text),
			irtest.User("go on"),
		}}, ExtractiveOptions{})
		files := got[strings.Index(got, "## Files"):]
		if !strings.Contains(files, "- src/_pytest/python.py: named, not opened") {
			t.Errorf("%q: the path beside the pattern is not in the ledger:\n%s", text, got)
		}
		for _, piece := range []string{"_test.py", "conftest.py", ".cfg", "test_"} {
			if strings.Contains(files, "- "+piece) || strings.Contains(files, "/"+piece+":") {
				t.Errorf("%q: a piece of a glob, %q, is in the ledger:\n%s", text, piece, files)
			}
		}
	}
}

// TestHarnessWarningNotQuoted: mini-swe-agent's advice above an output too long for it is the
// harness's, not what the command printed: the excerpt says the output was cut and quotes
// the output's head (pytest-6197's `ls -R` line quoted five lines of the advice first), each
// line once (pylint-7080's quoted __init__.py six times).
func TestHarnessWarningNotQuoted(t *testing.T) {
	obs := "<returncode>0</returncode>\n<warning>\nThe output of your last command was too long.\n" +
		"Please try a different command that produces less output.\n" +
		"If you're looking at a file you can try use head, tail or sed to view a smaller number of lines selectively.\n" +
		"</warning><output_head>\n.:\nAUTHORS\nCHANGELOG.rst\nsrc\ntesting\ntox.ini\n\n./src:\n__init__.py\n\n./testing:\n__init__.py\n</output_head>\n" +
		"<elided_chars>\n81234 characters elided\n</elided_chars>\n<output_tail>\n./testing/python:\ncollect.py\nmetafunc.py\n</output_tail>"
	got := ExtractiveSummary(engine.SummaryInput{Messages: []*compactorv1.Message{
		irtest.User("<pr_description>pytest collects random __init__.py files</pr_description>"),
		irtest.Assistant("THOUGHT: Let me look at the layout.\n\n```bash\nls -R\n```"),
		irtest.User(obs),
		irtest.Assistant("THOUGHT: Now the collection code.\n\n```bash\ngrep -n collect_file src/_pytest/python.py\n```"),
	}}, ExtractiveOptions{})
	line := ""
	for l := range strings.SplitSeq(got, "\n") {
		if strings.Contains(l, "`ls -R` →") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no line for `ls -R`:\n%s", got)
	}
	if strings.Contains(line, "Please try") || strings.Contains(line, "too long.") {
		t.Errorf("the harness's advice is quoted: %s", line)
	}
	if strings.Count(line, "__init__.py") > 1 {
		t.Errorf("a line the listing repeats is quoted more than once: %s", line)
	}
	for _, want := range []string{elidedNote, "AUTHORS", "tox.ini"} {
		if !strings.Contains(line, want) {
			t.Errorf("the excerpt lacks %q: %s", want, line)
		}
	}
}

// TestMentionsKeepEmphasizedPaths: a path the agent writes in markdown bold
// ("**src/auth/login.py**", "**`src/auth/login.py`**", the form Claude writes file names in
// its own summaries) names that file: no '*' of it is a glob's.
func TestMentionsKeepEmphasizedPaths(t *testing.T) {
	for _, text := range []string{
		"The check lives in **src/auth/login.py**, which the tests do not cover.",
		"1. **`src/auth/login.py`** - the session check that rejects expired tokens.",
	} {
		got := ExtractiveSummary(engine.SummaryInput{Messages: []*compactorv1.Message{
			irtest.User("Expired tokens still log users in; fix it."),
			irtest.Assistant(text),
			irtest.User("go on"),
		}}, ExtractiveOptions{})
		i := strings.Index(got, "## Files")
		if i < 0 || !strings.Contains(got[i:], "- src/auth/login.py: named, not opened") {
			t.Errorf("%q: the path is not in the ledger:\n%s", text, got)
		}
	}
}

// TestWarningOnlyTheHarnesses: a <warning> element the command printed (docutils' XML of a
// ".. warning::" directive, a config file) is the command's output, not mini-swe-agent's
// advice: the excerpt quotes it and does not say the harness cut the output.
func TestWarningOnlyTheHarnesses(t *testing.T) {
	tests := []struct {
		name, cmd, obs, want string
	}{
		{"mini-swe-agent, a short output with a docutils warning", "python render.py",
			"<returncode>0</returncode>\n<output>\n<document source=\"index.rst\">\n<warning>\n" +
				"Lines too long for the page are wrapped.\n</warning>\n</document>\n</output>",
			"Lines too long for the page are wrapped."},
		{"a config file the agent cats", "cat deploy/config.xml",
			"<returncode>0</returncode>\n<output>\n<config>\n  <warning>\n    Rotate the key before 2027-01-01.\n  </warning>\n</config>\n</output>",
			"Rotate the key before 2027-01-01."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ExtractiveSummary(engine.SummaryInput{Messages: []*compactorv1.Message{
				irtest.User("<pr_description>Document the key rotation.</pr_description>"),
				irtest.Assistant("THOUGHT: Let me look.\n\n```bash\n" + tt.cmd + "\n```"),
				irtest.User(tt.obs),
				irtest.Assistant("THOUGHT: Next.\n\n```bash\nls docs\n```"),
			}}, ExtractiveOptions{})
			line := ""
			for l := range strings.SplitSeq(got, "\n") {
				if strings.Contains(l, "`"+tt.cmd+"` →") {
					line = l
				}
			}
			if line == "" {
				t.Fatalf("no line for %q:\n%s", tt.cmd, got)
			}
			if strings.Contains(line, elidedNote) {
				t.Errorf("the excerpt says the harness cut the output: %s", line)
			}
			if !strings.Contains(line, tt.want) {
				t.Errorf("the excerpt lacks the command's %q: %s", tt.want, line)
			}
		})
	}
}

// TestCompactionNotesCited: an output an earlier compaction pruned, or cut in the middle, is
// excerpted by where the rest is, cited as the summary cites sources ([s1a2b3c4d m2]), not
// by the marker's words with its 64-digit hash cut off at the excerpt's line (the spotter
// sessions' summaries quoted "[full output in compactord source 23d0c976963e…").
func TestCompactionNotesCited(t *testing.T) {
	src := strings.Repeat("23d0c976", 8)
	pruned := "[pruned: output of tool Bash, 766 tokens removed] [full output in compactord source " + src + " m2, for Expand]"
	cut := "line one of the output\n[… 335 tokens cut from the middle of this output by compaction; full output in compactord source " + src + " m4, for Expand …]\nthe last line"
	got := ExtractiveSummary(engine.SummaryInput{Messages: []*compactorv1.Message{
		irtest.User("Work on bead spotter-a0y."),
		irtest.Assistant("", irtest.Call("c1", "Bash", `{"command":"bd show spotter-a0y"}`)),
		irtest.Result("c1", "Bash", irtest.OutText(pruned)),
		irtest.Assistant("", irtest.Call("c2", "Bash", `{"command":"bd list --all"}`)),
		irtest.Result("c2", "Bash", irtest.OutText(cut)),
		irtest.Assistant("", irtest.Call("c3", "Bash", `{"command":"bd ready"}`)),
		irtest.Result("c3", "Bash", irtest.OutText("1. spotter-a0y.1 ready")),
		irtest.Assistant("Claiming spotter-a0y.1."),
	}}, ExtractiveOptions{})
	for _, want := range []string{"bd show spotter-a0y) → pruned earlier [s23d0c976 m2]", "[… [s23d0c976 m4] …]"} {
		if !strings.Contains(got, want) { // (checkHasLacks reads a summary without its citations)
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	checkHasLacks(t, got, nil, []string{"full output in compactord source", "[pruned: output of tool"})
}

// TestLedgerOneFileTwoNames: one file under its absolute name (Claude Code's tools) and a
// shorter one (git, the agent's prose) is one ledger line under the longer name, whichever
// came first; a short name that ends two files' names is a line of its own (spotter-dov's
// app.js was "read ×4, edited ×2" beside "assets/js/app.js: named, not opened").
func TestLedgerOneFileTwoNames(t *testing.T) {
	read := func(id, p string) []*compactorv1.Message {
		return []*compactorv1.Message{
			irtest.Assistant("", irtest.Call(id, "Read", `{"file_path":"`+p+`"}`)),
			irtest.Result(id, "Read", irtest.OutText("1→let Hooks = {}")),
		}
	}
	commit := []*compactorv1.Message{
		irtest.Assistant("", irtest.Call("g", "Bash", `{"command":"git add assets/js/app.js && git commit -m 'hooks'"}`)),
		irtest.Result("g", "Bash", irtest.OutText("[main 1a2b3c] hooks\n 1 file changed")),
	}
	abs := "/home/u/proj/assets/js/app.js"
	tests := []struct {
		name  string
		msgs  [][]*compactorv1.Message
		lines []string // the ledger's lines, path and actions
	}{
		{"absolute first", [][]*compactorv1.Message{read("r", abs), commit, {irtest.Assistant("app.js is committed.")}},
			[]string{"- " + abs + ": read"}},
		{"relative first", [][]*compactorv1.Message{{irtest.Assistant("I will read assets/js/app.js first.")}, read("r", abs)},
			[]string{"- " + abs + ": read"}},
		{"a short name two files end with", [][]*compactorv1.Message{read("r1", abs), read("r2", "/home/u/proj/vendor/app.js"), {irtest.Assistant("app.js is read.")}},
			[]string{"- " + abs + ": read", "- /home/u/proj/vendor/app.js: read", "- app.js: named, not opened"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := []*compactorv1.Message{irtest.User("Make the hooks const.")}
			for _, m := range tt.msgs {
				msgs = append(msgs, m...)
			}
			got := citeSuffix.ReplaceAllString(ExtractiveSummary(engine.SummaryInput{Messages: msgs}, ExtractiveOptions{})+"\n", "\n")
			_, files, _ := strings.Cut(got, "## Files (what was done to each)\n")
			files, _, _ = strings.Cut(files, "\n\n")
			if lines := strings.Split(strings.TrimSpace(files), "\n"); !slices.Equal(lines, tt.lines) {
				t.Errorf("ledger %q, want %q:\n%s", lines, tt.lines, got)
			}
		})
	}
}

// TestRoomLeftShowsMore: with room left once every item worth something is chosen, the
// newest items take their longer form: tau-bench's get_user_details was cut to the user's
// certificate, 550 tokens spare, and the credit card the user chooses two turns later
// (credit_card_6040264, "the Visa ending in 2076") was left out.
func TestRoomLeftShowsMore(t *testing.T) {
	body, err := os.ReadFile(corpus.Named(t, "taubench-airline-t46-r3.openai.json").Path)
	if err != nil {
		t.Fatal(err)
	}
	msgs := irtest.ReadOpenAIChat(t, body)
	const budget = 1985
	got := ExtractiveSummary(engine.SummaryInput{Messages: msgs[1:31]}, ExtractiveOptions{MaxTokens: budget})
	if !strings.Contains(got, "credit_card_6040264") {
		t.Errorf("the user's payment method is left out with %d of %d tokens used:\n%s", ApproxTokens(got), budget, got)
	}
	if n := ApproxTokens(got); n > budget {
		t.Errorf("%d tokens, over the budget %d", n, budget)
	}
}

// sweObservation is SWE-agent's text-protocol observation: out, then its prompt state line.
func sweObservation(out string) *compactorv1.Message {
	return irtest.User(out + "\n(Open file: /repo/x)\n(Current directory: /repo)\nbash-$")
}

// TestSWEAgentCommands: SWE-agent's own commands in its text protocol (create, edit …
// end_of_edit on the open file, open) are what they do to files, and an edit's lines are the
// text it writes, not commands (pydicom-1458's ledger had its reproduction script "ran
// (failed)" and the handler it opened "named, not opened").
func TestSWEAgentCommands(t *testing.T) {
	got := ExtractiveSummary(engine.SummaryInput{TaskInHead: true, Messages: []*compactorv1.Message{
		irtest.Assistant("Create the script.\n```\ncreate reproduce_bug.py\n```"),
		sweObservation("[File: /repo/reproduce_bug.py (1 lines total)]\n1:"),
		irtest.Assistant("Paste the code.\n```\nedit 1:1\nimport numpy as np\nrm -rf build\nprint('ok')\nend_of_edit\n```"),
		sweObservation("[File: /repo/reproduce_bug.py (3 lines total)]\n1:import numpy as np\n2:rm -rf build\n3:print('ok')\nFile updated."),
		irtest.Assistant("Open the handler.\n```\nopen pydicom/pixel_data_handlers/numpy_handler.py 293\n```"),
		sweObservation("[File: /repo/pydicom/pixel_data_handlers/numpy_handler.py (372 lines total)]\n293: raise AttributeError("),
		irtest.Assistant("Now I will fix it."),
	}}, ExtractiveOptions{})
	checkHasLacks(t, got,
		[]string{"- reproduce_bug.py: created, edited; last edit wrote", "- pydicom/pixel_data_handlers/numpy_handler.py: read"},
		[]string{"build: deleted", "- build:"})
}

// TestNestedRecordsNameTheirOwner: a nested object of a JSON record (a flight's seats and
// prices) is excerpted with what identifies the record it belongs to: tau-bench's second
// flight's prices read as the first flight's (taubench-t02: HAT255's under HAT130).
func TestNestedRecordsNameTheirOwner(t *testing.T) {
	out := `[{"flight_number": "HAT130", "origin": "DEN", "destination": "MIA", "status": "available", "available_seats": {"basic_economy": 11, "economy": 3, "business": 8}, "prices": {"basic_economy": 85, "economy": 165, "business": 399}}, ` +
		`{"flight_number": "HAT255", "origin": "DEN", "destination": "MIA", "status": "available", "available_seats": {"basic_economy": 15, "economy": 12, "business": 1}, "prices": {"basic_economy": 91, "economy": 108, "business": 377}}]`
	fields := jsonFields(out)
	for _, f := range fields {
		if strings.HasPrefix(f, "prices:") || strings.HasPrefix(f, "available_seats:") {
			t.Errorf("a nested record without its owner: %q (all: %q)", f, fields)
		}
	}
	want := "flight_number=HAT255 prices: basic_economy=91, business=377, economy=108"
	if !slices.Contains(fields, want) {
		t.Errorf("no part %q in %q", want, fields)
	}
	for _, tt := range []struct {
		key  string
		want bool
	}{{"id", true}, {"user_id", true}, {"flight_number", true}, {"reservationId", true}, {"name", true}, {"code", true},
		{"zip-code", false}, {"currencyCode", false}, {"country_code", false}, {"first_name", false},
		{"valid", false}, {"rename", false}, {"genid", false}, {"origin", false}, {"prices", false}} {
		if got := identKey(tt.key); got != tt.want {
			t.Errorf("identKey(%q) = %v, want %v", tt.key, got, tt.want)
		}
	}
}

// TestKeptRequestIsNoOutput: a request the compaction keeps verbatim beside the summary is
// not summarized as a command's output, whatever it reads as (pydicom-1458: SWE-agent's issue,
// after a summary that held only the demonstration, was quoted as "(output) → ISSUE: …").
func TestKeptRequestIsNoOutput(t *testing.T) {
	issue := irtest.User("We're currently solving the following issue within our repository. Here's the issue text:\nISSUE:\nPixel Representation attribute should be optional\n\nINSTRUCTIONS:\n6. When editing files, it is easy to accidentally specify a wrong line number.\n(Open file: n/a)\n(Current directory: /repo)\nbash-$")
	got := ExtractiveSummary(engine.SummaryInput{
		Anchor: "## Agent notes\n- the summarized part held only a few-shot demonstration of another task, left out\n",
		Kept:   []*compactorv1.Message{issue},
		Messages: []*compactorv1.Message{
			issue,
			irtest.Assistant("Reproduce first.\n```\npython reproduce_bug.py\n```"),
			irtest.User("Traceback (most recent call last):\nAttributeError: missing PixelRepresentation\n(Open file: n/a)\n(Current directory: /repo)\nbash-$"),
			irtest.Assistant("Reproduced."),
		}}, ExtractiveOptions{})
	checkHasLacks(t, got, []string{"`python reproduce_bug.py` → failed: AttributeError: missing PixelRepresentation"}, []string{"(output) →", "ISSUE:", "Pixel Representation attribute"})
}

// TestReportBody: a sub-agent's report is excerpted by what it found, not by the sentence it
// opens with to introduce it nor by the line Claude Code appends for resuming the agent
// (python-to-rust-port: "Task(…) → Excellent! Now I have a complete picture. Let me provide
// you with a comprehensive overview …").
func TestReportBody(t *testing.T) {
	report := "Excellent! Now I have a complete picture. Let me provide you with a comprehensive overview of the Python project:\n\n" +
		"- src/strings.py defines reverse_string(s) and is tested by tests/test_strings.py\n" +
		"- src/mathx.py defines factorial(n), which raises NegativeInputError below zero\n" +
		"All test coverage is 100%.agentId: ab81802 (for resuming to continue this agent's work if needed)"
	delegate := `{"description":"Explore the project","prompt":"Explore this Python project thoroughly and tell me every module, function, error type and test so that I can port it to Rust.","subagent_type":"Explore"}`
	got := ExtractiveSummary(engine.SummaryInput{Messages: []*compactorv1.Message{
		irtest.User("Port this Python project to Rust and keep 100% coverage."),
		irtest.Assistant("", irtest.Call("t1", "Task", delegate)), irtest.Result("t1", "Task", irtest.OutText(report)),
		irtest.Assistant("Now the Rust crate."),
	}}, ExtractiveOptions{})
	checkHasLacks(t, got, []string{"reverse_string(s)", "All test coverage is 100%."}, []string{"Excellent!", "agentId", "for resuming"})
	for _, tt := range []struct{ in, want string }{
		{"Found 2 files:", "Found 2 files:"}, // a line alone is what the report says
		{"Here is what I found:\n- a.go", "- a.go"},
		{"Found 3 callers of parse():\n- a.go\n- b.go\n- c.go", "Found 3 callers of parse():\n- a.go\n- b.go\n- c.go"},
		{"All set.\nagentId: 1 (for resuming to continue this agent's work if needed)", "All set.\n"},
	} {
		if got := reportBody(tt.in); got != tt.want {
			t.Errorf("reportBody(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRejectedEdit: an edit SWE-agent's linter rejected was not applied: a failed call, the
// file edited (failed), not an edit that went through (sweagent-testrepo-i1, pydicom-1458).
func TestRejectedEdit(t *testing.T) {
	got := ExtractiveSummary(engine.SummaryInput{TaskInHead: true, Messages: []*compactorv1.Message{
		irtest.Assistant("Open it.\n```\nopen src/fields.py 1474\n```"),
		sweObservation("[File: /repo/src/fields.py (1997 lines total)]\n1474:        return int(value)"),
		irtest.Assistant("Round it.\n```\nedit 1474:1474\n            return int(round(value))\nend_of_edit\n```"),
		sweObservation("Your proposed edit has introduced new syntax error(s). Please understand the fixes and retry your edit commmand.\n\n" +
			"ERRORS:\n- E999 IndentationError: unexpected indent\n\nThis is how your edit would have looked if applied\n" +
			"-------------------------------------------------\n[File: /repo/src/fields.py (1997 lines total)]\n1474:            return int(round(value))"),
		irtest.Assistant("I will fix the indentation."),
	}}, ExtractiveOptions{})
	checkHasLacks(t, got,
		[]string{"- src/fields.py: read, edited (failed)", "`edit 1474:1474 return int(round(value)) end_of_edit` → failed: not applied: E999 IndentationError: unexpected indent"},
		[]string{"src/fields.py: read, edited;", "→ Your proposed edit"})
}

// TestLastActionOnce: the last action is said once, with more of its output where there is
// room, in its place: its longer line was added under the calls too, its start said twice
// (taubench-t46's search_onestop_flight).
func TestLastActionOnce(t *testing.T) {
	var rows []string
	for i := range 12 {
		rows = append(rows, fmt.Sprintf(`{"flight_number": "HAT%03d", "origin": "SFO", "destination": "JFK", "prices": {"economy": %d}}`, i, 100+i))
	}
	got := ExtractiveSummary(engine.SummaryInput{Messages: []*compactorv1.Message{
		irtest.User("Book me a flight from SFO to JFK on May 17."),
		irtest.Assistant("", irtest.Call("s1", "search_onestop_flight", `{"origin":"SFO","destination":"JFK","date":"2024-05-17"}`)),
		irtest.Result("s1", "search_onestop_flight", irtest.OutText("["+strings.Join(rows, ", ")+"]")),
		irtest.Assistant("Here are the options."),
	}}, ExtractiveOptions{})
	if n := strings.Count(got, "search_onestop_flight("); n != 1 {
		t.Errorf("the last action is said %d times:\n%s", n, got)
	}
	if !strings.Contains(got, "- last action: search_onestop_flight(") || !strings.Contains(got, "HAT006") {
		t.Errorf("the last action is not said with the room's worth of its output:\n%s", got)
	}
}

// TestSWEAgentCommandWithoutArguments: SWE-agent's search commands without arguments (the
// harness answers with their usage) are summarized, not a panic.
func TestSWEAgentCommandWithoutArguments(t *testing.T) {
	for _, cmd := range []string{"search_dir", "find_file", "search_file"} {
		t.Run(cmd, func(t *testing.T) {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("ExtractiveSummary panics on the command %q: %v", cmd, p)
				}
			}()
			ExtractiveSummary(engine.SummaryInput{TaskInHead: true, Messages: []*compactorv1.Message{
				irtest.Assistant("Search for it.\n```\n" + cmd + "\n```"),
				irtest.User("Usage: " + cmd + " <search_term> [<dir>]\n(Open file: n/a)\n(Current directory: /repo)\nbash-$"),
				irtest.Assistant("I need an argument."),
			}}, ExtractiveOptions{})
		})
	}
}

// ledgerLines returns the lines of a summary's files ledger, without their citations.
func ledgerLines(got string) []string {
	got = citeSuffix.ReplaceAllString(got+"\n", "\n")
	_, files, _ := strings.Cut(got, "## Files (what was done to each)\n")
	files, _, _ = strings.Cut(files, "\n\n")
	return strings.Split(strings.TrimSpace(files), "\n")
}

// TestLedgerAmbiguousShortName: a short name two files end with stays a line of its own when a
// third file of that name comes: it was merged into the third.
func TestLedgerAmbiguousShortName(t *testing.T) {
	read := func(id, p string) []*compactorv1.Message {
		return []*compactorv1.Message{
			irtest.Assistant("", irtest.Call(id, "Read", `{"file_path":"`+p+`"}`)),
			irtest.Result(id, "Read", irtest.OutText("1→let Hooks = {}")),
		}
	}
	msgs := []*compactorv1.Message{irtest.User("Make the hooks const.")}
	msgs = append(msgs, read("r1", "/home/u/proj/assets/app.js")...)
	msgs = append(msgs, read("r2", "/home/u/proj/vendor/app.js")...)
	msgs = append(msgs, irtest.Assistant("app.js is read."))
	msgs = append(msgs, read("r3", "/home/u/proj/lib/app.js")...)
	msgs = append(msgs, irtest.Assistant("Done."))
	got := ExtractiveSummary(engine.SummaryInput{Messages: msgs}, ExtractiveOptions{})
	lines := ledgerLines(got)
	want := "- app.js: named, not opened"
	found := false
	for _, l := range lines {
		if l == want {
			found = true
		}
		if strings.HasPrefix(l, "- /home/u/proj/lib/app.js:") && l != "- /home/u/proj/lib/app.js: read" {
			t.Errorf("lib/app.js took over the ambiguous name: %q", l)
		}
	}
	if !found {
		t.Errorf("the short name two files end with is no line of its own: %q\n%s", lines, got)
	}
}

// lastActionInput is a range whose last action is a search with a long JSON answer.
func lastActionInput() engine.SummaryInput {
	var rows []string
	for i := range 12 {
		rows = append(rows, fmt.Sprintf(`{"flight_number": "HAT%03d", "origin": "SFO", "destination": "JFK", "prices": {"economy": %d}}`, i, 100+i))
	}
	return engine.SummaryInput{Messages: []*compactorv1.Message{
		irtest.User("Book me a flight from SFO to JFK on May 17."),
		irtest.Assistant("", irtest.Call("s1", "search_onestop_flight", `{"origin":"SFO","destination":"JFK","date":"2024-05-17"}`)),
		irtest.Result("s1", "search_onestop_flight", irtest.OutText("["+strings.Join(rows, ", ")+"]")),
		irtest.Assistant("Here are the options."),
	}}
}

// TestLongerFormCostsTheDifference: the longer form of a prioritized item (the last action)
// replaces it at the difference of their costs: it was left out with room for it, both
// counted.
func TestLongerFormCostsTheDifference(t *testing.T) {
	in := lastActionInput()
	roomy := ExtractiveSummary(in, ExtractiveOptions{MaxTokens: 4000})
	if !strings.Contains(roomy, "HAT006") {
		t.Fatalf("no longer form even with room:\n%s", roomy)
	}
	need := ApproxTokens(roomy)
	budget := int64(need + 40)
	got := ExtractiveSummary(in, ExtractiveOptions{MaxTokens: budget})
	if !strings.Contains(got, "HAT006") {
		t.Errorf("budget %d: the longer last action (%d tokens with it) is left out, %d tokens used:\n%s", budget, need, ApproxTokens(got), got)
	}
}

// TestNestedRecordOwnerNotAnAttribute: a key ending in "code" or "name" is an attribute of its
// object (a money object's currencyCode), not what identifies it: the nested record is still
// named by its owner (HAT255's price read as another flight's).
func TestNestedRecordOwnerNotAnAttribute(t *testing.T) {
	out := `[{"flight_number": "HAT130", "status": "available", "price": {"currencyCode": "USD", "units": 85}}, ` +
		`{"flight_number": "HAT255", "status": "available", "price": {"currencyCode": "USD", "units": 91}}]`
	fields := jsonFields(out)
	want := "flight_number=HAT255"
	for _, f := range fields {
		if strings.Contains(f, "units=91") && !strings.Contains(f, want) {
			t.Errorf("HAT255's price without the flight: %q (all: %q)", f, fields)
		}
	}
}

// TestFailureFixedByTheCommandExtended: a failed command is fixed by the same command run again
// with more to it (spotter-a0y's `git push` stayed an open error after `git push
// --set-upstream origin …` succeeded), not by another command of the same program.
func TestFailureFixedByTheCommandExtended(t *testing.T) {
	bash := func(id, cmd, out string) []*compactorv1.Message {
		return []*compactorv1.Message{
			irtest.Assistant("", irtest.Call(id, "Bash", `{"command":"`+cmd+`"}`)),
			irtest.Result(id, "Bash", irtest.OutText(out)),
		}
	}
	msgs := []*compactorv1.Message{irtest.User("Push the branch and run the tests.")}
	msgs = append(msgs, bash("p1", "git push", "fatal: The current branch bead/a0y has no upstream branch.\nExit code 128")...)
	msgs = append(msgs, bash("t1", "go test ./x", "--- FAIL: TestX (0.00s)\nFAIL\nExit code 1")...)
	msgs = append(msgs, bash("p2", "git push --set-upstream origin bead/a0y", "branch 'bead/a0y' set up to track 'origin/bead/a0y'.")...)
	msgs = append(msgs, bash("t2", "go test ./y", "ok  \tproj/y\t0.01s")...)
	msgs = append(msgs, irtest.Assistant("Pushed; x still fails."))
	got := ExtractiveSummary(engine.SummaryInput{Messages: msgs}, ExtractiveOptions{})
	_, errs, _ := strings.Cut(got, "## Errors\n")
	errs, _, _ = strings.Cut(errs, "\n\n")
	if !strings.Contains(errs, "Bash(git push): fatal: The current branch bead/a0y has no upstream branch. → fixed") {
		t.Errorf("the push's failure is not fixed by the push with its upstream:\n%s", got)
	}
	if !strings.Contains(errs, "go test ./x") || strings.Contains(errs, "go test ./x): --- FAIL: TestX (0.00s) → fixed") {
		t.Errorf("another package's tests fixed ./x's failure:\n%s", got)
	}
	for _, tt := range []struct {
		later, earlier string
		want           bool
	}{
		{"git push --set-upstream origin main", "git push", true},
		{"mix credo --strict", "mix credo", true},
		{"go test ./...", "go test ./x", false},
		{"git push", "git push", false},
		{"npm test", "git push", false},
	} {
		if got := extends(tt.later, tt.earlier); got != tt.want {
			t.Errorf("extends(%q, %q) = %v, want %v", tt.later, tt.earlier, got, tt.want)
		}
	}
}

package summarize

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/internal/irtest"
)

// marker is a source marker as engine.SourceMarker writes it.
var marker = engine.SourceMarker(strings.Repeat("ab", 32), engine.SourceRange{First: 1, Last: 40})

// TestAnchorReadsEverySection: whatever wrote the previous summary, the next one carries its
// requests whole, its files ledger, its latest plan and what it said was pending, and never
// its metadata as content.
func TestAnchorReadsEverySection(t *testing.T) {
	task := "Port the parser in src/parse.py to Go.\nKeep the public API unchanged, please."
	later := "Also add a fuzz test for the tokenizer in src/lex.go"
	tests := []struct {
		name, anchor string
		requests     []string // carried whole
		files        []string
		plan, notes  []string // in the summary
	}{{
		name: "extractive with instructions, check appendix, citations, Sources and marker",
		anchor: "Instructions for this summary:\n- Focus on the parser.\n\n" +
			"## User requests (verbatim)\n- Port the parser in src/parse.py to Go.\n  Keep the public API unchanged, please. [m1]\n\n" +
			"## Where it stopped\n- last intent: run the tests next [m38–40]\n\n" +
			"## Plan (latest state)\n- [x] read src/parse.py\n- [ ] write parse.go\n\n" +
			"## Files (what was done to each)\n- src/parse.py: read ×2, edited [s1a2b3c4d m12–18]\n- named, not opened: docs/api.md, src/old.py\n\n" +
			"Sources: m1–m40 of source abab…\n\n" +
			"## Kept verbatim by the summary check\n\nRequest 2:\n" + later + "\n\n" +
			"Files the summarized part named: src/lex.go, cmd/tool/main.go\n" + marker,
		requests: []string{task, later},
		files:    []string{"src/parse.py", "docs/api.md", "src/old.py", "src/lex.go", "cmd/tool/main.go"},
		plan:     []string{"- [ ] write parse.go"},
		notes:    []string{"- src/parse.py: read ×2, edited [s1a2b3c4d m12–18]", "last intent: run the tests next [m38–40]"},
	}, {
		name: "LLM markdown headings",
		anchor: "## User requests and constraints\n- \"" + strings.ReplaceAll(task, "\n", " ") + "\"\n- \"" + later + "\"\n\n" +
			"## Files and identifiers\n- `src/parse.py`: read, then edited `parseExpr`\n- Created cmd/tool/main.go with the CLI.\n\n" +
			"## Plan\n1. Finish parse.go\n2. Run go test ./...\n\n" +
			"## Pending tasks\n- The fuzz test is not written yet.\n\n" +
			fidelity.CheckedHeading + "\n\nRequest 3:\nPlease also update docs/api.md to match the new behaviour\n" + marker,
		requests: []string{strings.ReplaceAll(task, "\n", " "), later, "Please also update docs/api.md to match the new behaviour"},
		files:    []string{"src/parse.py", "cmd/tool/main.go"},
		plan:     []string{"1. Finish parse.go", "2. Run go test ./..."},
		notes:    []string{"The fuzz test is not written yet."},
	}, {
		name: "bold and numbered headings",
		anchor: "Summary of the work so far.\n\n**User requests:**\n- " + later + "\n\n" +
			"3. Files and identifiers:\n- src/lex.go: created\n\n" +
			"**Next step**\nWrite the fuzz test in src/lex_test.go.\n",
		requests: []string{later},
		files:    []string{"src/lex.go"},
		notes:    []string{"Summary of the work so far.", "Write the fuzz test in src/lex_test.go."},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := AnchorCarried(tc.anchor)
			for i, r := range tc.requests {
				if i >= len(c.Requests) || c.Requests[i] != r {
					t.Errorf("carried requests %q, want %q in order", c.Requests, tc.requests)
					break
				}
			}
			for _, f := range tc.files {
				if !slices.Contains(c.Paths, f) {
					t.Errorf("carried paths %q lack %q", c.Paths, f)
				}
			}
			in := engine.SummaryInput{Anchor: tc.anchor, Messages: []*compactorv1.Message{
				irtest.User("Thanks, go on with the next step of the work."),
				irtest.Assistant("Going on."),
			}}
			got := ExtractiveSummary(in, ExtractiveOptions{MaxTokens: 4096})
			for _, want := range append(append(append(tc.requests, tc.files...), tc.plan...), tc.notes...) {
				if !strings.Contains(got, strings.ReplaceAll(want, "\n", "\n  ")) {
					t.Errorf("the summary lacks %q:\n%s", want, got)
				}
			}
			// The new summary states its own legend of citations once; the anchor's is not carried.
			for _, not := range []string{"[compactord source", "Sources:", "Kept verbatim", "Focus on the parser"} {
				if strings.Contains(strings.Replace(got, engine.CitationLegend, "", 1), not) {
					t.Errorf("the summary holds %q:\n%s", not, got)
				}
			}
			if again := ExtractiveSummary(engine.SummaryInput{Anchor: got}, ExtractiveOptions{MaxTokens: 4096}); !strings.Contains(again, strings.ReplaceAll(tc.requests[0], "\n", "\n  ")) {
				t.Errorf("the summary of the summary lost the task:\n%s", again)
			}
		})
	}
}

// TestAnchorPlainText: an anchor without any heading is kept whole as the earlier summary.
func TestAnchorPlainText(t *testing.T) {
	got := ExtractiveSummary(engine.SummaryInput{Anchor: "The user asked to port src/parse.py.\n\nIt is half done."},
		ExtractiveOptions{MaxTokens: 512})
	if !strings.Contains(got, "## Earlier summary\nThe user asked to port src/parse.py.\n\nIt is half done.") {
		t.Errorf("the plain anchor is not kept whole:\n%s", got)
	}
}

// TestReplacedProviderCompaction: a provider's compaction replaced by its readable summary
// (engine.ReplacedCompactionText) is carried as an earlier summary, section by section.
func TestReplacedProviderCompaction(t *testing.T) {
	earlier := "## User requests and constraints\n- \"Port the parser in src/parse.py to Go, keeping its API.\"\n\n## Plan\n1. Write parse.go\n2. Run the tests\n"
	got := ExtractiveSummary(engine.SummaryInput{Messages: []*compactorv1.Message{
		irtest.Assistant(engine.ReplacedCompactionText(engine.ProviderAnthropic, earlier)),
		irtest.User("Go on with the next step of the port, please."),
		irtest.Assistant("Writing parse.go now."),
	}}, ExtractiveOptions{MaxTokens: 1024})
	for _, want := range []string{"## User requests (verbatim)\n- Port the parser in src/parse.py to Go, keeping its API.", "## Plan (latest state)\n1. Write parse.go\n2. Run the tests"} {
		if !strings.Contains(got, want) {
			t.Errorf("the summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "compacted the conversation") {
		t.Errorf("the replacement's opening line is content:\n%s", got)
	}
}

// TestAnchorFileCitations: a file only the earlier summary named keeps that summary's
// citations of it and gains none to the summary itself, however many compactions carry it;
// a file the range acted on again is cited there too.
func TestAnchorFileCitations(t *testing.T) {
	anchor := "## Files (what was done to each)\n- src/parse.py: read ×2 [s1a2b3c4d m12–18]\n- src/lex.go: read [s1a2b3c4d m20–21]\n"
	msgs := []*compactorv1.Message{
		irtest.User("Go on with the port, please."),
		irtest.Assistant("Reading the lexer again.", irtest.Call("c1", "Read", `{"file_path":"src/lex.go"}`)),
		irtest.Result("c1", "Read", irtest.OutText("package lex\n\nfunc Next() Token { return Token{} }")),
		irtest.Assistant("The lexer returns an empty token."),
	}
	line := func(summary, path string) string {
		for _, l := range strings.Split(summary, "\n") {
			if strings.HasPrefix(l, "- "+path+":") {
				return l
			}
		}
		t.Fatalf("no line for %s in:\n%s", path, summary)
		return ""
	}
	got := ExtractiveSummary(engine.SummaryInput{Anchor: anchor, Messages: msgs}, ExtractiveOptions{MaxTokens: 2048})
	for range 3 { // each compaction carries the previous summary
		got = ExtractiveSummary(engine.SummaryInput{Anchor: got, Messages: msgs[:1]}, ExtractiveOptions{MaxTokens: 2048})
	}
	if l := line(got, "src/parse.py"); len(engine.ParseCitations(l)) != 1 || !strings.HasSuffix(l, "[s1a2b3c4d m12–18]") {
		t.Errorf("a file only the earlier summary named is cited as %q, want its earlier citation alone", l)
	}
	first := ExtractiveSummary(engine.SummaryInput{Anchor: anchor, Messages: msgs}, ExtractiveOptions{MaxTokens: 2048})
	if l := line(first, "src/lex.go"); len(engine.ParseCitations(l)) != 2 {
		t.Errorf("a file read again is cited as %q, want the earlier citation and the new read", l)
	}
}

// TestAnchorPendingAnswered: when the range opens with the output of the one call the
// earlier summary said was waiting for its result, the summary states that call with its
// outcome, and no longer says it is waiting.
func TestAnchorPendingAnswered(t *testing.T) {
	anchor := "## Where it stopped\n- last intent: run the tests [s1a2b3c4d m39]\n- waiting for the result of: `pytest tests/test_a.py` [s1a2b3c4d m40]\n"
	msgs := []*compactorv1.Message{
		irtest.User("<returncode>0</returncode>\n<output>\n3 passed in 0.12s\n</output>"),
		irtest.Assistant("The tests pass; now the docs.\n\n```bash\ncat docs/a.md\n```"),
		irtest.User("<returncode>0</returncode>\n<output>\n# A\n</output>"),
	}
	got := ExtractiveSummary(engine.SummaryInput{Anchor: anchor, Messages: msgs}, ExtractiveOptions{MaxTokens: 2048})
	if !strings.Contains(got, "- `pytest tests/test_a.py` [s1a2b3c4d m40] → 3 passed in 0.12s") {
		t.Errorf("the answered call is not stated with its outcome:\n%s", got)
	}
	if strings.Contains(got, "waiting for the result of: `pytest") || strings.Contains(got, "(output)") {
		t.Errorf("the summary still says the call waits, or names its output alone:\n%s", got)
	}
}

// TestAnchorErrorsFixedLater: an earlier summary's failures of one call, said twice, are one
// line with both citations; when the range runs the same call and it succeeds, the line says
// it was fixed, as an error of the range's own would.
func TestAnchorErrorsFixedLater(t *testing.T) {
	anchor := "## Errors\n- `python reproduce_issue_v2.py`: IndentationError: unexpected indent [s1a2b3c4d m25–26]\n" +
		"- `python reproduce_issue_v2.py`: IndentationError: unexpected indent [s5e6f7a8b m38–39]\n" +
		"- `make docs`: exit 2 [s5e6f7a8b m40–41]\n"
	const failure = "- `python reproduce_issue_v2.py`: IndentationError: unexpected indent"
	for _, tt := range []struct {
		name  string
		msgs  []*compactorv1.Message
		fixed bool
	}{
		{"run again, and it passes", []*compactorv1.Message{
			irtest.Assistant("THOUGHT: again.\n\n```bash\npython reproduce_issue_v2.py\n```"),
			irtest.User("<returncode>0</returncode>\n<output>\nSUCCESS\n</output>")}, true},
		{"not run again", []*compactorv1.Message{
			irtest.Assistant("THOUGHT: look.\n\n```bash\nsed -n '20,40p' django/db/models/constraints.py\n```"),
			irtest.User("<returncode>0</returncode>\n<output>\nclass BaseConstraint:\n</output>")}, false},
	} {
		got := ExtractiveSummary(engine.SummaryInput{Anchor: anchor, Messages: tt.msgs}, ExtractiveOptions{MaxTokens: 2048})
		want := failure + " [s1a2b3c4d m25–26] [s5e6f7a8b m38–39]"
		if tt.fixed {
			want = failure + " → fixed: the same call succeeded later [s1a2b3c4d m25–26] [s5e6f7a8b m38–39]"
		}
		for _, w := range []string{want, "- `make docs`: exit 2 [s5e6f7a8b m40–41]"} {
			if !strings.Contains(got, w+"\n") {
				t.Errorf("%s: summary lacks %q:\n%s", tt.name, w, got)
			}
		}
		if n := strings.Count(got, failure); n != 1 {
			t.Errorf("%s: the failure is said %d times, want once:\n%s", tt.name, n, got)
		}
	}
}

// TestAnchorErrorsWeighed: how an earlier summary's failed call is weighed against the range
// (a second reading's cases): the latest run of the same call decides; a name cut short
// decides nothing; lines in other words, or marked resolved or fixed, are carried as they
// were, where they were.
func TestAnchorErrorsWeighed(t *testing.T) {
	sum := func(anchor string, msgs ...*compactorv1.Message) string {
		return ExtractiveSummary(engine.SummaryInput{Anchor: anchor, Messages: msgs}, ExtractiveOptions{MaxTokens: 2048})
	}
	shell := func(cmd string) *compactorv1.Message {
		return irtest.Assistant("THOUGHT: run.\n\n```bash\n" + cmd + "\n```")
	}
	out := func(rc, text string) *compactorv1.Message {
		return irtest.User("<returncode>" + rc + "</returncode>\n<output>\n" + text + "\n</output>")
	}
	indent := "  File \"x.py\", line 3\nIndentationError: unexpected indent"
	const failed = "- `python x.py`: IndentationError: unexpected indent"
	anchor := "## Errors\n" + failed + " [s1a2b3c4d m25–26]\n"

	// The range fails the same way: said once, by the range.
	got := sum(anchor, shell("python x.py"), out("1", indent), shell("ls"), out("0", "x.py"))
	if n := strings.Count(got, failed); n != 1 || strings.Contains(got, "[s1a2b3c4d m25–26]") {
		t.Errorf("a failure the range repeats is said %d times, or by the earlier line:\n%s", n, got)
	}
	// Fixed, then failing again: not fixed.
	got = sum(anchor, shell("python x.py"), out("0", "ok"), shell("python x.py"), out("1", indent), shell("ls"), out("0", "x.py"))
	if strings.Contains(got, fixedSuffix) {
		t.Errorf("a failure whose latest run failed again is called fixed:\n%s", got)
	}
	// A command cut short: another command of the same cut name fixes nothing.
	mid := strings.Repeat("a", 30)
	first := sum("", irtest.User("Run the checks."), shell("python run_all_the_checks.py --case "+mid+"AAAAAAAAAA"+mid+" --verbose"),
		out("1", "ValueError: bad case"), shell("ls"), out("0", "x"))
	got = sum(first, shell("python run_all_the_checks.py --case "+mid+"BBBBBBBBBB"+mid+" --verbose"), out("0", "ok"), shell("ls"), out("0", "x"))
	if strings.Contains(got, "ValueError: bad case"+fixedSuffix) {
		t.Errorf("a failure is fixed by another command of the same cut name:\n%s", got)
	}
	// A command or a tool's argument holding ": ": still read, merged and fixed.
	commit := "- `git commit -m \"fix: x\"`: exit 1"
	got = sum("## Errors\n"+commit+" [s1a2b3c4d m5–6]\n"+commit+" [s5e6f7a8b m9–10]\n",
		shell(`git commit -m "fix: x"`), out("0", "[main 123] fix: x"), shell("ls"), out("0", "x"))
	if n := strings.Count(got, commit); n != 1 || !strings.Contains(got, commit+fixedSuffix+" [s1a2b3c4d m5–6] [s5e6f7a8b m9–10]\n") {
		t.Errorf("a command holding \": \": said %d times, or not fixed with both citations:\n%s", n, got)
	}
	bash := "- Bash(echo \"key: v\" >> cfg.yml): exit 1"
	got = sum("## Errors\n"+bash+" [s1a2b3c4d m5–6]\n",
		irtest.Assistant("again", irtest.Call("c1", "Bash", `{"command":"echo \"key: v\" >> cfg.yml"}`)), irtest.Result("c1", "Bash", irtest.OutText("")),
		irtest.Assistant("look", irtest.Call("c2", "Bash", `{"command":"ls"}`)), irtest.Result("c2", "Bash", irtest.OutText("cfg.yml")))
	if !strings.Contains(got, bash+fixedSuffix) {
		t.Errorf("a tool call holding \": \" is not fixed:\n%s", got)
	}
	// Order, and lines in other words, kept as they were.
	got = sum("## Errors\n- `a.sh`: exit 1 [s1a2b3c4d m1–2]\n- The build broke after the rename.\n- `b.sh`: exit 2 [s1a2b3c4d m3–4]\n"+
		"- `c.sh`: exit 3 (resolved by a rebuild)\n- `d.sh`: exit 4"+fixedSuffix+"\n- `e.py`: SyntaxError: invalid syntax\n  # x = (1,\n",
		shell("ls"), out("0", "x"))
	if i, j, k := strings.Index(got, "`a.sh`"), strings.Index(got, "The build broke"), strings.Index(got, "`b.sh`"); !(i >= 0 && i < j && j < k) {
		t.Errorf("the carried errors changed order:\n%s", got)
	}
	checkHasLacks(t, got, []string{"- `c.sh`: exit 3 (resolved by a rebuild)", "- `d.sh`: exit 4" + fixedSuffix, "\n  # x = (1,"}, []string{"\n# x = (1,"})
	for _, w := range []struct {
		line string
		want float64
	}{{"- `c.sh`: exit 3 (resolved by a rebuild)", worthEarlier}, {"- `d.sh`: exit 4" + fixedSuffix, worthEarlier}} {
		x := newExtractor(nil, nil)
		x.anchor("## Errors\n" + w.line + "\n")
		x.build()
		for _, it := range x.items {
			if strings.HasPrefix(it.text, w.line) && it.base != w.want {
				t.Errorf("%q is worth %v, want %v", w.line, it.base, w.want)
			}
		}
	}
}

// TestEarlierIntentSaidOnce: an earlier summary's last intent that its notes also hold is
// not carried a second time as "earlier, last intent" once the range says a newer one.
func TestEarlierIntentSaidOnce(t *testing.T) {
	anchor := "## Where it stopped\n- last intent: Now I need to update `deconstruct`. [m18]\n\n" +
		"## Agent notes\n- I'll add `violation_error_code` to `BaseConstraint`. [m12]\n- Now I need to update `deconstruct`. [m18]\n"
	msgs := []*compactorv1.Message{
		irtest.Assistant("THOUGHT: I'll update `deconstruct` to include `violation_error_code`.\n\n```bash\nsed -n '68,80p' django/db/models/constraints.py\n```"),
		irtest.User("<returncode>0</returncode>\n<output>\ndef deconstruct(self):\n</output>"),
		irtest.Assistant("THOUGHT: Now update `CheckConstraint`.\n\n```bash\ngrep -n CheckConstraint django/db/models/constraints.py\n```"),
	}
	got := ExtractiveSummary(engine.SummaryInput{Anchor: engine.QualifyCitations(anchor, strings.Repeat("cd", 32)), Messages: msgs}, ExtractiveOptions{MaxTokens: 2048})
	if n := strings.Count(got, "Now I need to update `deconstruct`."); n != 1 {
		t.Errorf("the earlier intent is said %d times, want once:\n%s", n, got)
	}
	checkHasLacks(t, got, []string{"- last intent: Now update `CheckConstraint`."}, []string{"earlier, last intent"})

	// An earlier intent the notes do not hold is carried as such.
	anchor = "## Where it stopped\n- last intent: Check the migration next. [m18]\n\n## Agent notes\n- Now I need to update `deconstruct`. [m16]\n"
	got = ExtractiveSummary(engine.SummaryInput{Anchor: engine.QualifyCitations(anchor, strings.Repeat("cd", 32)), Messages: msgs}, ExtractiveOptions{MaxTokens: 2048})
	checkHasLacks(t, got, []string{"- earlier, last intent: Check the migration next."}, nil)
}

// TestHostSummaryCarried: the summary Claude Code opens a conversation with after compacting
// on its own is an earlier summary, carried forward, not a request of the user's; the files it
// read again are its own, not the user's words either.
func TestHostSummaryCarried(t *testing.T) {
	continued := "This session is being continued from a previous conversation that ran out of context. The summary below covers the earlier portion of the conversation.\n\n" +
		"Summary:\n1. Primary Request and Intent: unify the transcript views (spotter-dov).\n9. Optional Next Step: fix the guard in transcript_components.ex."
	msgs := []*compactorv1.Message{
		irtest.User(continued),
		irtest.Assistant("", irtest.Call("r1", "Read", `{"file_path":"lib/transcript_components.ex"}`)),
		irtest.Result("r1", "Read", irtest.OutText("defp expand_control_for(line, groups) do")),
		irtest.Msg(compactorv1.Role_ROLE_USER, irtest.Text("Result of calling the Read tool: \"defmodule X\""), irtest.Text("now run the tests")),
		irtest.Assistant("Running them."),
	}
	got := ExtractiveSummary(engine.SummaryInput{Messages: msgs}, ExtractiveOptions{MaxTokens: 2048})
	checkHasLacks(t, got, []string{"1. Primary Request and Intent: unify the transcript views (spotter-dov).", "## User requests (verbatim)\n- now run the tests\n"},
		[]string{"> This session is being continued", "- This session is being continued", "Result of calling the Read tool"})
}

// Claude Code's compaction prompt asks for nine numbered sections; its summary opens the
// conversation after it compacted.
func claudeCodeSummary(code int) string {
	var b strings.Builder
	b.WriteString("This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n")
	b.WriteString("Analysis:\nLet me chronologically analyze the conversation.\n\n")
	b.WriteString("Summary:\n1. Primary Request and Intent:\n   The user asked to unify the transcript views (spotter-dov).\n\n")
	b.WriteString("2. Key Technical Concepts:\n   - Phoenix LiveView\n\n")
	b.WriteString("3. Files and Code Sections:\n   - lib/transcript_components.ex\n     ```elixir\n")
	for i := 0; i < code; i++ {
		fmt.Fprintf(&b, "     defp expand_control_for_%d(line, groups), do: groups[line] # %d\n", i, i)
	}
	b.WriteString("     ```\n\n")
	b.WriteString("4. Errors and fixes:\n   - FunctionClauseError in expand_control_for/2: fixed by adding a guard.\n\n")
	b.WriteString("5. Problem Solving:\n   Solved the duplicate rendering.\n\n")
	b.WriteString("6. All user messages:\n   - \"unify the transcript views (spotter-dov)\"\n   - \"also keep the old CSS class names\"\n\n")
	b.WriteString("7. Pending Tasks:\n   - Run the test suite.\n\n")
	b.WriteString("8. Current Work:\n   Editing the guard in transcript_components.ex.\n\n")
	b.WriteString("9. Optional Next Step:\n   Run mix test.\n")
	return b.String()
}

// TestHostSummarySections: the nine sections of Claude Code's own summary are carried each
// where it belongs: the user's messages it quotes are not errors, nor is its problem solving.
func TestHostSummarySections(t *testing.T) {
	msgs := []*compactorv1.Message{
		irtest.Msg(compactorv1.Role_ROLE_USER, irtest.Text(claudeCodeSummary(3)), irtest.Text("now run the tests")),
		irtest.Assistant("", irtest.Call("r1", "Bash", `{"command":"mix test"}`)),
		irtest.Result("r1", "Bash", irtest.OutText("3 tests, 0 failures")),
		irtest.Assistant("All pass."),
	}
	got := ExtractiveSummary(engine.SummaryInput{Messages: msgs}, ExtractiveOptions{MaxTokens: 2048})
	_, errs, _ := strings.Cut(got, "## Errors\n")
	errs, _, _ = strings.Cut(errs, "\n## ")
	for _, bad := range []string{"All user messages", "also keep the old CSS class names", "Problem Solving"} {
		if strings.Contains(errs, bad) {
			t.Errorf("the host summary's %q is carried under ## Errors:\n%s", bad, errs)
		}
	}
}

// TestHostSummaryAndAnchor: a host's own summary (40 KB and more) in a range that also builds
// on an earlier summary of compactord's: both are carried, within the budget, deterministically,
// and the user's words beside the host's summary are a request.
func TestHostSummaryAndAnchor(t *testing.T) {
	anchor := "## User requests (verbatim)\n- fix the login page [m2]\n\n## Where it stopped\n- last intent: Check the form. [m9]\n\n" +
		"## Files (what was done to each)\n- lib/login.ex: read, edited [m4–6]\n\n## Agent notes\n- The form posts to /session. [m5]\n"
	anchor = engine.QualifyCitations(anchor, strings.Repeat("cd", 32))
	msgs := []*compactorv1.Message{
		irtest.Msg(compactorv1.Role_ROLE_USER, irtest.Text(claudeCodeSummary(2000)), irtest.Text("now run the tests")),
		irtest.Assistant("", irtest.Call("r1", "Bash", `{"command":"mix test"}`)),
		irtest.Result("r1", "Bash", irtest.OutText("3 tests, 0 failures")),
		irtest.Assistant("All pass."),
	}
	in := engine.SummaryInput{Anchor: anchor, Messages: msgs}
	got := ExtractiveSummary(in, ExtractiveOptions{MaxTokens: 2048})
	if n := ApproxTokens(got); n > 2048 {
		t.Errorf("%d tokens", n)
	}
	if again := ExtractiveSummary(in, ExtractiveOptions{MaxTokens: 2048}); again != got {
		t.Errorf("not deterministic")
	}
	checkHasLacks(t, got, []string{"- fix the login page", "- now run the tests", "lib/login.ex"}, nil)
}

// TestHostSummaryStructure: Claude Code's own summary (engine.ContinuedSummary) is carried by
// its sections, as its real ones are written (spotter-dov, -gqc): the request and intent it
// states first is kept, its capitalised "All User Messages" are the requests, the changes it
// lists under a file stay with the file, and neither its opening line nor its model's draft
// ("Analysis:") is carried.
func TestHostSummaryStructure(t *testing.T) {
	cc := "This session is being continued from a previous conversation that ran out of context. The summary below covers the earlier portion of the conversation.\n\n" +
		"Analysis:\n" + strings.Repeat("Let me chronologically analyze the conversation and every step the agent took in it.\n", 60) + "\n" +
		"Summary:\n1. Primary Request and Intent:\n   The user asked to port src/parse.py to Rust, keeping the public API.\n\n" +
		"2. Key Technical Concepts:\n   - Rust\n\n" +
		"3. Files and Code Sections:\n   - **`src/parse.py`** — the parser\n" + strings.Repeat("     - Added a helper function to the parser module for another case\n", 60) + "\n" +
		"4. Errors and Fixes:\n   - none\n\n" +
		"5. Problem Solving:\n   - none\n\n" +
		"6. All User Messages:\n   - \"Port src/parse.py to Rust, keeping the public API.\"\n\n" +
		"7. Pending Tasks:\n   - Write tests\n\n8. Current Work:\n   Porting.\n\n9. Optional Next Step:\n   Write tests.\n"
	in := engine.SummaryInput{Messages: []*compactorv1.Message{
		irtest.User(cc),
		irtest.Assistant("", irtest.Call("c1", "bash", `{"command":"cargo build"}`)),
		irtest.Result("c1", "bash", irtest.OutText("ok")),
		irtest.Assistant("Building works."),
	}}
	got := ExtractiveSummary(in, ExtractiveOptions{MaxTokens: 600})
	checkHasLacks(t, got,
		[]string{"The user asked to port src/parse.py", "## User requests (verbatim)\n- Port src/parse.py to Rust, keeping the public API."},
		[]string{"This session is being continued", "chronologically", "\n- Added a helper"})
	for _, l := range strings.Split(got, "\n") {
		if strings.Contains(l, "Added a helper") && !strings.Contains(l, "src/parse.py") {
			t.Errorf("a change listed under src/parse.py is carried without it: %q", l)
		}
	}
	// With room, the file's line carries what the host's summary says of it, bounded.
	roomy := ExtractiveSummary(in, ExtractiveOptions{MaxTokens: 4000})
	line := ""
	for l := range strings.SplitSeq(roomy, "\n") {
		if strings.HasPrefix(l, "- src/parse.py: ") {
			line = l
		}
	}
	if !strings.Contains(line, "Added a helper") || len(line) > priorFileBytes+100 {
		t.Errorf("the file's line (%d bytes) does not carry the host's words on it, bounded: %q", len(line), line)
	}
}

// TestNamedGivesWay: what an earlier summary said of a file only named gives way to what the
// range did to it ("named, not opened, read, edited" read as a contradiction), and a path the
// summary check kept by name alone is not said to be unopened (pylint-7080's pylinter.py,
// edited, became "named, not opened" after a summary the check cut).
func TestNamedGivesWay(t *testing.T) {
	edits := []*compactorv1.Message{
		irtest.Assistant("", irtest.Call("c1", "bash", `{"command":"cat src/a.py"}`)),
		irtest.Result("c1", "bash", irtest.OutText("x = 1\n")),
		irtest.Assistant("", irtest.Call("c2", "bash", `{"command":"sed -i 's/1/2/' src/a.py"}`)),
		irtest.Result("c2", "bash", irtest.OutText("")),
		irtest.Assistant("Done."),
	}
	quiet := []*compactorv1.Message{irtest.User("go on"), irtest.Assistant("Next I check the tests.")}
	checked := "## Where it stopped\n- last intent: I'll revert the change. [m5]\n\n" +
		"## Kept verbatim by the summary check\n\nFiles the summarized part named: src/a.py, src/b.py\n"
	tests := []struct {
		name, anchor string
		msgs         []*compactorv1.Message
		want         string
	}{
		{"named before, edited now", "## Files (what was done to each)\n- src/a.py: named, not opened [m3]\n", edits, "- src/a.py: read, edited"},
		{"named before, nothing now", "## Files (what was done to each)\n- src/a.py: named, not opened [m3]\n", quiet, "- src/a.py: named, not opened"},
		{"kept by the check, nothing now", checked, quiet, "- src/a.py: named"},
		{"kept by the check, edited now", checked, edits, "- src/a.py: read, edited"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ExtractiveSummary(engine.SummaryInput{Anchor: tt.anchor, Messages: tt.msgs}, ExtractiveOptions{})
			line := ""
			for l := range strings.SplitSeq(got, "\n") {
				if strings.HasPrefix(l, "- src/a.py:") {
					line = l
				}
			}
			if l, _, _ := strings.Cut(line, " ["); l != tt.want && !strings.HasPrefix(line, tt.want+";") {
				t.Errorf("ledger line %q, want %q:\n%s", line, tt.want, got)
			}
		})
	}
}

// TestAnchorLeadIn: a lead-in line of an earlier summary ("Still needed for gqc.6:") is an
// item with the list after it, not the tail of the item before: read as it was, a summary
// carried the lead-in followed by the list's last step alone ("Commit and push"), as if
// the rest were done (spotter-gqc).
func TestAnchorLeadIn(t *testing.T) {
	cc := "This session is being continued from a previous conversation that ran out of context. The summary below covers the earlier portion of the conversation.\n\n" +
		"Summary:\n4. Errors and fixes:\n   - none\n\n" +
		"8. Current Work:\n   Working on **spotter-gqc.6**. The code changes are complete:\n" +
		"   - Added `handle_event(\"close_review_session\", ...)`\n   - Added flash message display div for showing closure count\n   \n" +
		"   Still needed for gqc.6:\n   - Add tests to `test/spotter_web/live/project_review_live_test.exs` for close with N>0 and N=0 paths\n" +
		"   - Run `mix compile --warnings-as-errors`\n   - Run `mix test` and `mix credo --strict`\n   - `bd close spotter-gqc.6`\n   - Commit and push\n"
	items := readAnchor(cc[strings.Index(cc, "Summary:"):])
	var lead string
	for _, it := range items {
		if strings.HasPrefix(it.text, "Still needed for gqc.6:") {
			lead = it.text
		}
	}
	if !strings.Contains(lead, "- Add tests") || !strings.HasSuffix(lead, "- Commit and push") {
		t.Errorf("the lead-in's item %q, want it with its whole list (items %q)", lead, items)
	}
	for _, budget := range []int64{120, 160, 200, 260} {
		got := ExtractiveSummary(engine.SummaryInput{Messages: []*compactorv1.Message{irtest.User(cc), irtest.Assistant("Continuing with gqc.6.")}}, ExtractiveOptions{MaxTokens: budget})
		lines := strings.Split(got, "\n")
		for i, l := range lines {
			if strings.Contains(l, "Still needed for gqc.6:") && (i+1 == len(lines) || !strings.Contains(lines[i+1], "Add tests")) {
				t.Errorf("budget %d: the lead-in is not followed by the list's first step:\n%s", budget, got)
			}
		}
		if strings.Contains(got, "Summary:") {
			t.Errorf("budget %d: the host's \"Summary:\" line is carried:\n%s", budget, got)
		}
	}
}

// TestAnchorOneFileTwoLines: an earlier ledger that lists one file under two names (written
// before names were merged) keeps what the fuller line says: its "named, not opened" line
// read second overwrote the edits the other carried.
func TestAnchorOneFileTwoLines(t *testing.T) {
	anchor := "## Files (what was done to each)\n- app.js: read ×4, edited ×2 [m3]\n- assets/js/app.js: named, not opened [m5]\n"
	got := ExtractiveSummary(engine.SummaryInput{Anchor: anchor, Messages: []*compactorv1.Message{
		irtest.User("go on"), irtest.Assistant("Next I check the tests."),
	}}, ExtractiveOptions{})
	lines := ledgerLines(got)
	ok := false
	for _, l := range lines {
		if strings.Contains(l, "app.js") && strings.Contains(l, "edited ×2") {
			ok = true
		}
	}
	if !ok {
		t.Errorf("the earlier summary's edits of app.js are lost: %q\n%s", lines, got)
	}
}

// TestAnchorCodeIsNoLeadIn: a code line ending with ":" (Python's def), quoted under a file in
// Claude Code's "Files and Code Sections", is no lead-in: it stays with the file, and the
// next file is not glued to it.
func TestAnchorCodeIsNoLeadIn(t *testing.T) {
	summary := "Summary:\n3. Files and Code Sections:\n" +
		"   - `src/parse.py`\n" +
		"      - Added the tokenizer's entry point\n" +
		"      ```python\n" +
		"      def tokenize(s):\n" +
		"          return s.split()\n" +
		"      ```\n" +
		"   - `src/other.py`\n" +
		"      - unchanged\n" +
		"\n4. Errors and fixes:\n   - none\n"
	items := readAnchor(summary)
	for _, it := range items {
		if strings.HasPrefix(strings.TrimSpace(it.text), "def tokenize") {
			t.Errorf("a code line under src/parse.py is an item of its own: %q (items %q)", it.text, items)
		}
		if strings.Contains(it.text, "src/other.py") && strings.Contains(it.text, "tokenize") {
			t.Errorf("the next file is glued to the code: %q", it.text)
		}
	}
}

// TestAnchorRequestIsNoLeadIn: a request quoted over several lines, one ending with ":" (a
// pasted traceback's "Traceback (most recent call last):"), stays one request when the next
// summary reads it back.
func TestAnchorRequestIsNoLeadIn(t *testing.T) {
	req := "The tests fail, here is what I get:\n```\nTraceback (most recent call last):\n  File \"x.py\", line 3, in <module>\nKeyError: 'a'\n```\nplease fix it"
	first := ExtractiveSummary(engine.SummaryInput{Messages: []*compactorv1.Message{
		irtest.User("Port src/a.py to Go."),
		irtest.Assistant("Done."),
		irtest.User(req),
		irtest.Assistant("Looking."),
	}}, ExtractiveOptions{})
	var reqs []string
	for _, it := range readAnchor(first) {
		if it.section == secRequests {
			reqs = append(reqs, it.text)
		}
	}
	if len(reqs) != 2 {
		t.Errorf("the earlier summary's two requests are read as %d: %q\n%s", len(reqs), reqs, first)
	}
	c := AnchorCarried(first)
	if len(c.Requests) != 2 || c.Requests[1] != req {
		t.Errorf("the requests carried: %q, want the second whole: %q", c.Requests, req)
	}
}

// TestAnchorFilesLeadIn: a lead-in at the top of a files section ("Changed in this part:")
// does not take the ledger lines after it, which keep what was done to each file.
func TestAnchorFilesLeadIn(t *testing.T) {
	anchor := "## Files (what was done to each)\nChanged in this part:\n- src/a.py: read, edited [m3]\n- src/b.py: created [m5]\n"
	got := ExtractiveSummary(engine.SummaryInput{Anchor: anchor, Messages: []*compactorv1.Message{
		irtest.User("go on"), irtest.Assistant("Next I check the tests."),
	}}, ExtractiveOptions{})
	checkHasLacks(t, got, []string{"- src/a.py: read, edited", "- src/b.py: created"}, nil)
}

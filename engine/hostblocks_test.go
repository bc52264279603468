package engine

import (
	"slices"
	"strings"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/irtest"
)

// Host blocks as real hosts write them (shortened): Claude Code's context reminder with the
// CLAUDE.md files and its transient reminders, a slash command's bookkeeping, Codex's AGENTS.md
// and environment context, Cline's environment details, and a harness's task beside its
// instructions (mini-swe-agent).
const (
	ccClaudeMd = "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# claudeMd\n" +
		"Codebase and user instructions are shown below. Be sure to adhere to these instructions.\n\n" +
		"Contents of /Users/me/.claude/CLAUDE.md (user's private global instructions for all projects):\n\n" +
		"# RULES\n- Always use egrep, never use grep!\n\n" +
		"      IMPORTANT: this context may or may not be relevant to your tasks.\n</system-reminder>"
	ccTodo = "<system-reminder>\nThis is a reminder that your todo list is currently empty. DO NOT mention this to the user " +
		"explicitly because they are already aware.\n</system-reminder>"
	ccIDE      = "<system-reminder>\nThe user opened the file /repo/src/app.ts in the IDE. This may or may not be related to the current task.\n</system-reminder>"
	ccModified = "<system-reminder>\nNote: /repo/CLAUDE.md was modified, either by the user or by a linter. Don't tell the user this.\n</system-reminder>"
	ccCommand  = "<command-name>/compact</command-name>\n          <command-message>compact</command-message>\n          <command-args></command-args>"
	ccHook     = "<user-prompt-submit-hook>lint passed</user-prompt-submit-hook>"
	cxAgents   = "# AGENTS.md instructions for /tmp/project\n\n<INSTRUCTIONS>\nUse pytest. Never push.\n</INSTRUCTIONS>"
	cxEnv      = "<environment_context>\n  <cwd>/tmp/project</cwd>\n  <approval_policy>on-request</approval_policy>\n</environment_context>"
	cxOld      = "<user_instructions>\n\nAlways run the tests before you commit.\n\n</user_instructions>"
	cxPlugins  = "<recommended_plugins>\nHere is a list of plugins.\n</recommended_plugins>"
	clineTask  = "<task>\nfix the failing test\n</task>\n\n<environment_details>\n# VSCode Visible Files\nsrc/a.ts\n</environment_details>"
	miniTask   = "<pr_description>\nConsider the following PR description:\nDateFormat.Y() is not zero-padded.\n</pr_description>\n\n" +
		"<instructions>\n# Task Instructions\nYou're a software engineer interacting continuously with a computer.\n</instructions>"
	words = "create a folder weather and generate a single page .html app that displays the current weather in graz."
)

func TestHostBlocks(t *testing.T) {
	tests := []struct {
		name     string
		parts    []string
		standing []bool // StandingPart, per part
		kind     UserKind
		head     bool   // InHead: standing instructions alone
		words    string // UserWords
	}{
		{"Claude Code: CLAUDE.md ahead of the user's words", []string{ccClaudeMd, words}, []bool{true, false}, UserRequest, false, words},
		{"Claude Code: a todo reminder beside the words", []string{ccTodo, "now run the tests"}, []bool{false, false}, UserRequest, false, "now run the tests"},
		{"Claude Code: the IDE reminder in the same text", []string{ccIDE + "\nwhy does it crash?"}, []bool{false}, UserRequest, false, "why does it crash?"},
		{"Claude Code: a transient reminder alone", []string{ccTodo}, []bool{false}, UserContext, false, ""},
		{"Claude Code: a file-changed note naming CLAUDE.md is transient", []string{ccModified}, []bool{false}, UserContext, false, ""},
		{"Claude Code: a slash command's bookkeeping", []string{ccCommand}, []bool{false}, UserContext, false, ""},
		{"a hook's output after the words", []string{"deploy it\n" + ccHook}, []bool{false}, UserRequest, false, "deploy it"},
		{"Codex: AGENTS.md and the environment alone", []string{cxAgents, cxEnv}, []bool{true, true}, 0, true, ""},
		{"Codex: with a transient block beside them", []string{cxPlugins, cxAgents, cxEnv}, []bool{false, true, true}, UserContext, false, ""},
		{"Codex: older user_instructions", []string{cxOld}, []bool{true}, 0, true, ""},
		{"Cline: the task with environment details", []string{clineTask}, []bool{false}, UserRequest, false, "<task>\nfix the failing test\n</task>"},
		{"mini-swe-agent: a task beside its instructions", []string{miniTask}, []bool{true}, UserRequest, true,
			"<pr_description>\nConsider the following PR description:\nDateFormat.Y() is not zero-padded.\n</pr_description>"},
		{"plain text that mentions a tag", []string{"Why does Claude add <system-reminder> tags?"}, []bool{false}, UserRequest, false, "Why does Claude add <system-reminder> tags?"},
		{"markup in the words", []string{"Make the title <b>bold</b>"}, []bool{false}, UserRequest, false, "Make the title <b>bold</b>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var parts []*compactorv1.Part
			for _, p := range tt.parts {
				parts = append(parts, irtest.Text(p))
			}
			m := irtest.Msg(compactorv1.Role_ROLE_USER, parts...)
			for i, p := range parts {
				if got := StandingPart(p); got != tt.standing[i] {
					t.Errorf("StandingPart(part %d) = %v, want %v", i, got, tt.standing[i])
				}
			}
			if got := InHead(m); got != tt.head {
				t.Errorf("InHead = %v, want %v", got, tt.head)
			}
			// As the first user message, after a system prompt: the task rule applies.
			kinds := ClassifyUsers([]*compactorv1.Message{irtest.Msg(compactorv1.Role_ROLE_SYSTEM, irtest.Text("sys")), m}, false)
			if kinds[1] != tt.kind {
				t.Errorf("kind = %v, want %v", kinds[1], tt.kind)
			}
			if got := UserWords(m); got != tt.words {
				t.Errorf("UserWords = %q, want %q", got, tt.words)
			}
			standing, rest := SplitInstructions(m)
			var n int
			for _, s := range tt.standing {
				if s {
					n++
				}
			}
			switch {
			case n == 0 && (standing != nil || rest != m):
				t.Errorf("SplitInstructions split a message without standing instructions")
			case n > 0 && (len(standing.GetParts()) != n || len(rest.GetParts()) != len(parts)-n):
				t.Errorf("SplitInstructions: %d standing parts and %d others, want %d and %d", len(standing.GetParts()), len(rest.GetParts()), n, len(parts)-n)
			case n > 0 && standing.GetParts()[0] != parts[slices.Index(tt.standing, true)]:
				t.Errorf("the standing part is not the message's own, byte for byte")
			}
		})
	}
}

// TestTheRealClaudeMdReminderIsStanding reads the CLAUDE.md reminder of a real Claude Code
// request in the corpus.
func TestTheRealClaudeMdReminderIsStanding(t *testing.T) {
	msgs := readCorpusFile(t, corpus.Named(t, "claudetrace-req64-post-compact.anthropic.json"))
	first := msgs[1]
	if !StandingPart(first.GetParts()[0]) {
		t.Fatalf("the real CLAUDE.md reminder is not standing instructions: %.200q", first.GetParts()[0].GetText().GetText())
	}
	for i, p := range first.GetParts()[1:] {
		if StandingPart(p) {
			t.Errorf("part %d is standing instructions: %.100q", i+1, p.GetText().GetText())
		}
	}
	if !strings.HasSuffix(UserWords(first), "alright, i changed my mind, please delete the weather folder") {
		t.Errorf("the user's words are not the message's last text: %.200q", UserWords(first))
	}
}

// TestKeptRequestsAfterASummaryAreRequests: the user messages a summary says its compaction
// kept verbatim are requests in the next plan, even a SWE-agent task, which ends with the
// prompt line of its observations.
func TestKeptRequestsAfterASummaryAreRequests(t *testing.T) {
	task := "We're currently solving the following issue within our repository.\nISSUE:\nfix it\n\n(Open file: n/a)\n(Current directory: /repo)\nbash-$"
	obs := "ls output\n(Open file: n/a)\n(Current directory: /repo)\nbash-$"
	msgs := []*compactorv1.Message{
		irtest.Msg(compactorv1.Role_ROLE_SYSTEM, irtest.Text("sys")),
		SummaryMessage("the agent looked around", 9, 1),
		irtest.User(task),
		irtest.Msg(compactorv1.Role_ROLE_ASSISTANT, irtest.Text("```\nls\n```")),
		irtest.User(obs),
	}
	if got := KeptAfter(msgs[1]); got != 1 {
		t.Fatalf("KeptAfter = %d, want 1", got)
	}
	kinds := ClassifyUsers(msgs[2:], true)
	if kinds[0] == UserRequest {
		t.Fatalf("without the summary the task reads as a request: the test needs it to read as an observation")
	}
	var got []UserKind
	eachUserText(msgs, 2, false, func(i int, k UserKind) { got = append(got, k) })
	if len(got) != 2 || got[0] != UserRequest || got[1] != UserObservation {
		t.Errorf("kinds after the summary = %v, want the kept task a request and the output an observation", got)
	}
	if KeptAfter(SummaryMessage("x", 9, 0)) != 0 || KeptAfter(irtest.User("the 3 user messages right after this one are the user's own requests")) != 0 {
		t.Errorf("KeptAfter reads a count that is not a compaction's")
	}
}

// TestHostBlockRulesAreLinear: reading a host block's body costs time in its length, not in
// its length squared: a block of a megabyte repeating "Contents of " on one line (which a
// caller may send in any user message) is read in well under a second, not in hours.
func TestHostBlockRulesAreLinear(t *testing.T) {
	text := "<x>" + strings.Repeat("Contents of ", 1<<20/12) + "</x>"
	done := make(chan bool, 1)
	go func() {
		done <- StandingPart(&compactorv1.Part{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: text}}})
	}()
	select {
	case standing := <-done:
		if standing {
			t.Error("a block quoting no instruction file is standing")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a 1 MiB host block still being read after 5 s")
	}
	if !StandingPart(&compactorv1.Part{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{
		Text: "<system-reminder>Contents of a note\nContents of /repo/AGENTS.md (project instructions):\nUse pytest.</system-reminder>"}}}) {
		t.Error("a block quoting an instruction file on a later line is not standing")
	}
}

// TestHeadTask: only a head message holding the user's words beside standing instructions (a
// harness's task) is a task the head keeps; standing instructions alone, a request outside
// the head and an observation are not.
func TestHeadTask(t *testing.T) {
	obs := irtest.User("<returncode>0</returncode>\n<output>ok</output>")
	tests := []struct {
		name string
		msgs []*compactorv1.Message
		want bool
	}{
		{"mini-swe-agent task", []*compactorv1.Message{irtest.Msg(compactorv1.Role_ROLE_SYSTEM, irtest.Text("You are a helpful assistant.")), irtest.User(miniTask)}, true},
		{"AGENTS.md alone", []*compactorv1.Message{irtest.User(cxAgents + "\n\n" + cxEnv)}, false},
		{"the task outside the head", []*compactorv1.Message{irtest.User("fix the failing test")}, false},
		{"an observation", []*compactorv1.Message{obs}, false},
		{"none", nil, false},
	}
	for _, tc := range tests {
		if got := HeadTask(tc.msgs); got != tc.want {
			t.Errorf("%s: HeadTask %v, want %v", tc.name, got, tc.want)
		}
	}
	// After a head task, a range starting with an observation has no task of its own.
	if k := ClassifyUsers([]*compactorv1.Message{obs}, true)[0]; k == UserRequest {
		t.Errorf("an observation after a head task classified as a request")
	}
}

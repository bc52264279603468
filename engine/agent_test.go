package engine_test

import (
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

func TestPathsIn(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"edit src/_pytest/python.py and tests/test_foo.py.", []string{"src/_pytest/python.py", "tests/test_foo.py"}},
		{"see https://example.com/a/b.html or //x/y.go", nil},
		{"main.go alone, /etc/hosts, dir/ only, a/b.verylongext", []string{"/etc/hosts"}},
		{"`./cmd/fidelity/main.go`", []string{"./cmd/fidelity/main.go"}},
		{"sed -i 's/parent.config.getini(/parent.getini(/g' src/x.py 2>/dev/null", []string{"src/x.py"}},
		{"bump to 1.2.3 in pkg/version.go", []string{"pkg/version.go"}},
	}
	for _, tt := range tests {
		got := engine.PathsIn(tt.text)
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("PathsIn(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

// TestPathRule is the one rule for paths (IsPath), file names (IsFileName) and both
// (IsPathLike), on the shapes agents' texts hold.
func TestPathRule(t *testing.T) {
	tests := []struct {
		w                    string
		file, path, pathLike bool
	}{
		{"reproduce_issue.py", true, false, true},
		{"Cargo.toml", true, false, true},
		{"lib.rs", true, false, true},
		{"django.db.models", false, false, false},
		{"self.assertEqual", false, false, false},
		{"1.2.3", false, false, false},
		{"v1.2.3", false, false, false},
		{"src/lib", false, false, false},
		{"and/or", false, false, false},
		{"TCP/IP", false, false, false},
		{"a/b/c", false, true, true},
		{"src/lib/", false, true, true},
		{"src/x.py", false, true, true},
		{"./run", false, true, true},
		{"../x", false, true, true},
		{"~/.bashrc", false, true, true},
		{"/etc/hosts", false, true, true},
		{"/testbed/setup.cfg", false, true, true},
		{"/setup.py", false, true, true},
		{"/parent.getini", false, false, false},
		{"/tmp", false, false, false},
		{"/.git/", false, false, false},
		{"./target/debug/wordfreq", false, true, true},
		{"/dev/null", false, false, false},
		{"/dev/stdout", false, false, false},
		{"s/parent.config.getini", false, false, false},
		{"s/foo/bar/g", false, false, false},
		{"s/a.py/b.py/", false, false, false},
		{"y/abc/xyz/", false, false, false},
		{"https://x.org/a.py", false, false, false},
		{"//x/y.go", false, false, false},
		{"a/.../b.py", false, false, false},
		{"./", false, false, false},
		{"/..", false, false, false},
		{"1/2/3", false, false, false},
		{".py", false, false, false},
		{"x/" + strings.Repeat("a", 200) + ".py", false, false, false},
	}
	for _, tt := range tests {
		if got := engine.IsFileName(tt.w); got != tt.file {
			t.Errorf("IsFileName(%q) = %v, want %v", tt.w, got, tt.file)
		}
		if got := engine.IsPath(tt.w); got != tt.path {
			t.Errorf("IsPath(%q) = %v, want %v", tt.w, got, tt.path)
		}
		if got := engine.IsPathLike(tt.w); got != tt.pathLike {
			t.Errorf("IsPathLike(%q) = %v, want %v", tt.w, got, tt.pathLike)
		}
	}
}

func TestObservationsAndDemonstrations(t *testing.T) {
	for _, tt := range []struct {
		text      string
		obs, demo bool
	}{
		{"<returncode>0</returncode>\n<output>\nok\n</output>", true, false},
		{"Found 1 matches for \"x.py\" in /repo:\n/repo/x.py\n(Open file: n/a)\n(Current directory: /repo)\nbash-$", true, false},
		{"OBSERVATION:\nfile written", true, false},
		{"Please always provide EXACTLY ONE action in triple backticks, found 0 actions.", true, false},
		{"Please always provide exactly one action in triple backticks.", true, false},
		{"Fix the bug in (Current directory: handling)", false, false},
		{"Here is a demonstration of how to correctly accomplish this task.", false, true},
		{"the example ends here\n--- END OF DEMONSTRATION ---\nnow your task", false, true},
		{"Please fix the parser.", false, false},
	} {
		if got := engine.IsObservation(tt.text); got != tt.obs {
			t.Errorf("IsObservation(%q) = %v", tt.text, got)
		}
		if got := engine.IsDemonstration(tt.text); got != tt.demo {
			t.Errorf("IsDemonstration(%q) = %v", tt.text, got)
		}
	}
}

// TestRepliesToCodeBlocks: a user's reply to an assistant's fenced block is the command's
// output only when the block is shell and the conversation speaks the text protocol (some
// user message reads as a tool's output by itself); a chat's code answer, or shell shown to a
// person, is followed by the user's next request.
func TestRepliesToCodeBlocks(t *testing.T) {
	user := func(s string) *compactorv1.Message {
		return &compactorv1.Message{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}}}
	}
	asst := func(s string) *compactorv1.Message {
		return &compactorv1.Message{Role: compactorv1.Role_ROLE_ASSISTANT, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}}}
	}
	const reply = "Thanks. Now make it handle time zones too."
	for _, tt := range []struct {
		name  string
		msgs  []*compactorv1.Message
		reply engine.UserKind // the kind of the last message
	}{
		{"a chat's Python answer", []*compactorv1.Message{user("Write me a date parser in Python."),
			asst("Here it is.\n\n```python\ndef parse(s):\n    return s.split('-')\n```"), user(reply)}, engine.UserRequest},
		{"shell shown to a person", []*compactorv1.Message{user("How do I install it?"),
			asst("Run this:\n\n```bash\npip install dateparser\n```"), user("It says permission denied.")}, engine.UserRequest},
		{"mini-swe-agent's format error", []*compactorv1.Message{user("Fix the parser."),
			asst("THOUGHT: look.\n\n```bash\nls\n```"), user("<returncode>0</returncode>\n<output>\nsrc\n</output>"),
			asst("THOUGHT: two.\n\n```bash\nls src\n```\n\n```bash\npwd\n```"), user("Please always provide EXACTLY ONE action in triple backticks, found 2 actions.")}, engine.UserObservation},
		{"mini-swe-agent's format error after a message of no command", []*compactorv1.Message{user("Fix the parser."),
			asst("THOUGHT: I will look at the parser first."), user("Please always provide EXACTLY ONE action in triple backticks, found 0 actions.")}, engine.UserObservation},
		{"mini-swe-agent's timeout after a compaction left no marked output", []*compactorv1.Message{
			{Role: compactorv1.Role_ROLE_USER, Kind: compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY, Parts: user("## User requests (verbatim)\n- Fix the parser.").Parts},
			asst("THOUGHT: run the tests.\n\n```bash\npython -m pytest tests\n```"), user("The last command <command>python -m pytest tests</command> timed out and has been killed.")}, engine.UserObservation},
		{"a labelled agent's command, its output unmarked", []*compactorv1.Message{user("Fix the parser."),
			asst("THOUGHT: list.\n\n```bash\nls\n```"), user("src tests")}, engine.UserObservation},
		{"prose quoting a fence before the command", []*compactorv1.Message{user("Fix the parser."),
			asst("THOUGHT: look.\n\n```bash\nls\n```"), user("<returncode>0</returncode>\n<output>\nREADME.md\n</output>"),
			asst("The README's ``` blocks are what breaks it.\n\n```bash\npython -m pytest tests\n```"), user("collected 0 items")}, engine.UserObservation},
		{"SWE-agent's unlabelled fence", []*compactorv1.Message{user("Fix the parser."),
			asst("DISCUSSION\nLook first.\n\n```\nls\n```"), user("src\n(Open file: n/a)\n(Current directory: /repo)\nbash-$"),
			asst("DISCUSSION\nSubmit.\n\n```\nsubmit\n```"), user("diff --git a/src/p.py b/src/p.py")}, engine.UserObservation},
	} {
		kinds := engine.ClassifyUsers(tt.msgs, tt.msgs[0].Kind == compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY)
		if got := kinds[len(kinds)-1]; got != tt.reply {
			t.Errorf("%s: the reply is kind %d, want %d", tt.name, got, tt.reply)
		}
		if got := engine.Requests(tt.msgs); tt.reply == engine.UserRequest && len(got) != 2 {
			t.Errorf("%s: requests %v, want the task and the reply", tt.name, got)
		}
	}
}

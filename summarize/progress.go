package summarize

// Helpers of the walk: the file ledger's actions (settled when a call's outcome is known),
// the words of the caller's instructions, the agent's last paragraph. ledger.go reads the
// actions out of tool calls and shell commands.

import (
	"strings"
	"unicode/utf8"

	"github.com/compactord/compactord/engine"
)

// file records an action on a file in the ledger.
func (x *extractor) file(path, action string) *ledgerFile {
	return x.files.note(path, action, x.next())
}

// instructionTerms are the words of the caller's instructions worth matching in tool
// outputs: four letters or more, not a common word.
func instructionTerms(ins string) []string {
	var terms []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(ins), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '/' || r == '-')
	}) {
		w = strings.Trim(w, ".-/")
		if len(w) < 4 || extStopWords[w] || seen[w] {
			continue
		}
		seen[w] = true
		terms = append(terms, w)
	}
	return terms
}

var extStopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields("about above after again also been before being below between both cannot could does doing down during each every from further have having here into keep kept more most must only other over same should some such summary summarize than that their them then there these they this those through under until very what when where which while with would your focus make sure please") {
		m[w] = true
	}
	return m
}()

// lastParagraph is the last paragraph of text outside fenced code blocks (the intent, not
// the command a text-protocol agent wrote after it), cut to n bytes from its end.
func lastParagraph(text string, n int) string {
	text = strings.TrimSpace(withoutFences(text))
	if i := strings.LastIndex(text, "\n\n"); i >= 0 {
		text = strings.TrimSpace(text[i:])
	}
	if len(text) > n {
		text = "…" + text[len(text)-n:]
		for !utf8.ValidString(text) {
			text = "…" + text[len("…")+1:]
		}
	}
	return text
}

// fileActions records what a call does to its files: a path argument is acted on as the
// tool's name and its command say (an editor's "view" reads, "str_replace" edits); a command
// argument that is a command line is read as a shell command; an edit that names no file
// edits the file an "open" tool opened last.
func (x *extractor) fileActions(tool, path, command string) []fileAct {
	var acts []fileAct
	add := func(path, action string) { acts = append(acts, fileAct{path, action}) }
	switch p := strings.Trim(path, " \t\"'"); {
	case p != "" && engine.IsPathLike(p):
		a := toolAction(tool, command)
		add(p, a)
		if a == actRead && strings.Contains(strings.ToLower(tool), "open") {
			x.openFile = p
		}
	case p == "" && x.openFile != "":
		// SWE-agent's edit and insert act on the file "open" opened last.
		if a := toolAction(tool, command); a == actEdit || a == actWrite {
			add(x.openFile, a)
		}
	}
	if command != "" && (path == "" || strings.ContainsAny(command, " \t\n")) {
		shellActions(command, add)
	}
	return acts
}

// fileAct is an action of a call on a file, recorded once the call's outcome is known.
type fileAct struct{ path, action string }

// settleActs records acts in the ledger, marked as failed when their call failed.
func (x *extractor) settleActs(acts []fileAct, failed bool) {
	for _, a := range acts {
		if strings.HasPrefix(a.path, "/dev/") {
			continue
		}
		if failed && a.action != actMention {
			a.action += failedSuffix
		}
		x.file(a.path, a.action)
	}
}

// withoutFences is text without its ``` fenced blocks; text itself when it is all code.
func withoutFences(text string) string {
	out := mapFences(text, func(string, bool) string { return "" })
	if strings.TrimSpace(out) == "" {
		return text
	}
	return out
}

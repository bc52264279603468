package summarize

// What the agent did and where it stopped: the file ledger's actions (settled when a call's
// outcome is known), errors resolved by a later success, tool-output excerpts (those matching
// the instructions first), and the pending step. The extractor in extract.go calls these as
// it walks the messages; ledger.go reads the actions out of tool calls and shell commands.

import (
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/compactord/compactord/engine"
)

// file records an action on a file in the ledger.
func (x *extractor) file(path, action string) {
	x.seq++
	x.files.note(path, action, x.seq)
}

// observation records a text-protocol agent's tool output: its error, or an excerpt, and
// whether it settles an earlier error of the same command.
func (x *extractor) observation(text string) {
	failed := false
	if rc, ok := returnCode(text); ok {
		failed = rc != 0
	}
	errItem := -1
	if line := extErrLine(text); line != "" {
		errItem = x.add(extErrors, "- output: "+engine.Truncate(extOneLine(line), extErrorBytes), 0)
	} else if failed {
		errItem = x.add(extErrors, "- "+engine.Truncate(x.lastShell, extErrorBytes)+": failed", 0)
	}
	x.settle(x.lastShell, errItem)
	x.settleActs(x.shellActs, errItem >= 0)
	x.shellActs = nil
	if errItem < 0 {
		x.excerpt(x.lastShellLabel, text)
	}
}

// returnCode reads mini-swe-agent's "<returncode>N</returncode>".
func returnCode(text string) (int, bool) {
	rest, ok := strings.CutPrefix(text, "<returncode>")
	if !ok {
		return 0, false
	}
	n, _, ok := strings.Cut(rest, "</returncode>")
	if !ok {
		return 0, false
	}
	rc, err := strconv.Atoi(strings.TrimSpace(n))
	return rc, err == nil
}

// settle records the outcome of a call with key: an error item (errItem ≥ 0) stays open
// until a later call with the same key succeeds, which marks it resolved.
func (x *extractor) settle(key string, errItem int) {
	if key == "" {
		return
	}
	if x.openErrors == nil {
		x.openErrors = make(map[string][]int)
	}
	if errItem >= 0 {
		x.openErrors[key] = append(x.openErrors[key], errItem)
		return
	}
	for _, i := range x.openErrors[key] {
		x.items[i].text += " (resolved: the same call succeeded later)"
		x.items[i].prio = 6 // a resolved error matters less than an open one
	}
	delete(x.openErrors, key)
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

// excerpt records the first lines of a successful tool output, or with instructions, the
// lines that hold their terms; outputs that match are kept before everything but the
// requests.
func (x *extractor) excerpt(label, body string) {
	lines, matched := excerptLines(body, x.terms)
	if len(lines) == 0 || len(strings.TrimSpace(body)) < extExcerptMin {
		return
	}
	text := extOneLine(engine.Truncate(strings.Join(lines, " / "), extExcerptBytes))
	if label == "" {
		label = "output"
	}
	i := x.add(extOutputs, "- "+engine.Truncate(label, extArgBytes)+": "+text, 0)
	x.items[i].prio = 7
	if matched {
		x.items[i].prio = 2
	}
}

// excerptLines returns up to extExcerptLines lines of body, whitespace-normalised: those
// that contain a term when there are terms and any does, else the first non-empty ones.
func excerptLines(body string, terms []string) (lines []string, matched bool) {
	all := strings.Split(body, "\n")
	if len(terms) > 0 {
		for _, l := range all {
			ll := strings.ToLower(l)
			for _, t := range terms {
				if strings.Contains(ll, t) {
					lines = append(lines, extOneLine(l))
					break
				}
			}
			if len(lines) == extExcerptLines {
				break
			}
		}
		if len(lines) > 0 {
			return lines, true
		}
	}
	for _, l := range all {
		if l = extOneLine(l); l != "" && !strings.HasPrefix(l, "<") {
			lines = append(lines, l)
			if len(lines) == extExcerptLines {
				break
			}
		}
	}
	return lines, false
}

// finish turns what was gathered at the end into items: the ledger's files, and where the
// range stopped (the latest intent, the latest action, calls still waiting for a result).
func (x *extractor) finish() {
	files := make([]*ledgerFile, 0, len(x.files.files))
	for _, f := range x.files.files {
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].seq < files[j].seq })
	for _, f := range files {
		i := x.add(extFiles, f.line(), 0)
		x.items[i].seq = f.seq
		x.items[i].prio = 6
		if len(f.acts) > 0 || f.prior != "" {
			x.items[i].prio = 4 // a file the agent worked on
		}
	}
	if x.lastIntent != "" {
		p := lastParagraph(x.lastIntent, extIntentBytes)
		x.intentWhole = p == strings.TrimSpace(x.lastIntent)
		x.items[x.add(extPending, "- last intent: "+extOneLine(p), 0)].prio = -9
	}
	if x.lastCall >= 0 {
		open := false
		for _, i := range x.openCalls {
			open = open || i == x.lastCall
		}
		if !open {
			x.items[x.add(extPending, "- last action: "+strings.TrimPrefix(x.items[x.lastCall].text, "- "), 0)].prio = 3
		}
	}
	idx := make([]int, 0, len(x.openCalls))
	for _, i := range x.openCalls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		x.items[x.add(extPending, "- waiting for the result of: "+strings.TrimPrefix(x.items[i].text, "- "), 0)].prio = -7
	}
}

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
	case p != "" && extPathLike(p):
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
		if failed && a.action != actMention {
			a.action += failedSuffix
		}
		x.file(a.path, a.action)
	}
}

// withoutFences is text without its ``` fenced blocks; text itself when it is all code.
func withoutFences(text string) string {
	var b strings.Builder
	rest := text
	for {
		i := strings.Index(rest, "```")
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		j := strings.Index(rest[i+3:], "```")
		if j < 0 {
			break
		}
		rest = rest[i+3+j+3:]
	}
	if strings.TrimSpace(b.String()) == "" {
		return text
	}
	return b.String()
}

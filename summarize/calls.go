package summarize

import (
	"cmp"
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

// A call is one action of the agent: a structured tool call, or a command a text-protocol
// agent wrote in a fenced block. Its outcome comes from structure (a tool result's error
// flag, a return code), and for a command that runs something, from how its output ends
// (a traceback, a failing test run); never from words inside a file it read.

// callStatus is a call's outcome.
type callStatus uint8

const (
	callPending callStatus = iota // no result in the range yet
	callOK
	callFailed
	callUnanswered // a text-protocol command the agent went on from without an observation of its own
	callRefused    // a text-protocol command its harness refused to run (engine.IsRefusal)
)

type call struct {
	seq    int
	outSeq int    // the event of its output; 0 while it has none
	tool   string // the tool's name; "shell" for a text-protocol command
	label  string // how the summary writes it: `command` or tool(key=value, …)
	// whole is the label with every argument (each cut to callWholeArgBytes; a command of
	// the text protocol cut to wholeCommandBytes): what a call that changed something, or
	// failed and is to be made again, or waits for its output, was given.
	whole string
	key   string // identifies a retry of the same call: the tool and its path and command
	// command is the command line a shell call or a tool's command argument ran ("" for a
	// call on a path).
	command string
	short   string // the tool and its path or command, cut: what an error line names
	acts    []fileAct
	// reads is set for calls whose output is content (reading, searching, listing): its
	// words never make the call a failure.
	reads  bool
	output string
	status callStatus
	detail string // the failure: an error line or "exit N"
	// fixedBy is, on a failure, the later success of the same call.
	fixedBy *call
	// edits are what an edit wrote, per file (new text), for the names it defined.
	edits []fileText
	// wroteWhole is set on a tool call that wrote a file whole through its arguments (not a
	// command): its output gives back the file, whose definitions the ledger states.
	wroteWhole bool
	// shown is set once the call is written as the last action.
	shown bool
	// plan is set on a call that wrote the agent's plan or todo list (the plan section).
	plan bool
	// delegated is set on a call that handed a task to another agent (a sub-agent, as
	// Claude Code's Task tool starts): its arguments give that agent its instructions and
	// name no file or command; its output is the other agent's report.
	delegated bool
	// reported is, on a delegated call with arguments besides its instructions, the label
	// without them: how a line with the other agent's report names the call (the report
	// says more than what it was told). "" otherwise: the label names it.
	reported string
}

// fileText is text a call wrote to a file.
type fileText struct{ path, text string }

// wroteText reports whether one of c's edits wrote text (a sed deleting lines writes none).
func (c *call) wroteText() bool {
	return slices.ContainsFunc(c.edits, func(e fileText) bool { return strings.TrimSpace(e.text) != "" })
}

// Caps on what a call line shows, in bytes.
const (
	callArgBytes      = 100
	callWholeArgBytes = 300
	callShortBytes    = 60
	callCommandBytes  = 200
	errorLineBytes    = 200
	// wholeCommandBytes caps a text-protocol command said whole (call.whole): such an agent
	// writes its scripts in its commands (a reproduction script in a here-document is often
	// 2 KB), and one that failed, or waits for its output, is the script the next turn fixes
	// or reads the output of.
	wholeCommandBytes = 1800
)

// keyArgs are the tool-call arguments worth showing, most telling first; those before
// "command" name files.
var keyArgs = []string{"path", "file_path", "filepath", "filename", "file", "notebook_path", "command", "cmd", "query",
	"pattern", "url", "old_str", "new_str", "name", "id", "action", "reservation_id", "user_id", "order_id", "thought"}

var keyArgRank = func() map[string]int {
	m := make(map[string]int, len(keyArgs))
	for i, k := range keyArgs {
		m[k] = i
	}
	return m
}()

// editTextArgs are the arguments whose text an edit writes into its file.
var editTextArgs = map[string]bool{"new_str": true, "file_text": true, "content": true, "new_string": true, "insert_text": true, "text": true, "replace": true}

// toolCall reads a structured tool call.
func (x *extractor) toolCall(tc *compactorv1.ToolCallPart) *call {
	c := &call{seq: x.next(), tool: cmp.Or(tc.GetToolName(), "tool")}
	in := strings.TrimSpace(tc.GetInputJson())
	var obj map[string]json.RawMessage
	if in == "" || in == "{}" {
		c.label, c.key, c.short = c.tool+"()", c.tool+"()", c.tool+"()"
		c.reads = toolAction(c.tool, "") == actRead || toolAction(c.tool, "") == actSearch
		return c
	}
	if err := json.Unmarshal([]byte(in), &obj); err != nil {
		c.label = c.tool + "(" + oneLine(engine.Truncate(in, callArgBytes)) + ")"
		c.key, c.short = c.tool+"("+in+")", c.tool+"(…)"
		x.use.note(in, c.seq, fromAgentCall)
		return c
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ri, iok := keyArgRank[keys[i]]
		rj, jok := keyArgRank[keys[j]]
		switch {
		case iok && jok:
			return ri < rj
		case iok != jok:
			return iok
		}
		return keys[i] < keys[j]
	})
	var args, all, keyParts []string
	var told []string // args but a delegation's instructions (reported)
	var path, command, first string
	instructed := false   // an argument gives another agent its instructions
	var pathless []string // text written without a path argument: into the file the call acts on
	for _, k := range keys {
		var s string
		if err := json.Unmarshal(obj[k], &s); err != nil {
			s = string(obj[k])
		} else {
			instructed = instructed || instructions(k, s)
		}
		x.use.note(s, c.seq, fromAgentCall)
		r, ranked := keyArgRank[k]
		if ranked && r <= keyArgRank["cmd"] {
			keyParts = append(keyParts, k+"="+s)
			switch {
			case r < keyArgRank["command"] && path == "":
				path = s
			case r >= keyArgRank["command"] && command == "":
				command = s
			}
		}
		if strings.HasPrefix(strings.TrimSpace(s), "*** Begin Patch") {
			patchActions(s, func(p, action string) { c.acts = append(c.acts, fileAct{p, action}) })
			c.edits = append(c.edits, patchTexts(s)...)
		}
		if editTextArgs[k] {
			if path != "" {
				c.edits = append(c.edits, fileText{path, s})
			} else {
				pathless = append(pathless, s)
			}
		}
		if !(editTextArgs[k] && len(s) > callArgBytes) {
			arg := k + "=" + oneLine(engine.Truncate(s, callArgBytes))
			if len(args) < 3 {
				args = append(args, arg)
			}
			if len(told) < 3 && !instructions(k, s) {
				told = append(told, arg)
			}
			all = append(all, k+"="+oneLine(engine.Truncate(s, callWholeArgBytes)))
		}
		if first == "" {
			first = s
		}
	}
	if len(keys) > len(all) {
		all = append(all, "…")
	}
	if len(keys) > len(args) {
		args = append(args, "…")
	}
	if len(keys) > len(told) {
		told = append(told, "…")
	}
	if todos := todoItems(obj); todos != nil {
		x.todo, x.todoSeq, c.plan = todos, c.seq, true
	}
	c.delegated = path == "" && command == "" && instructed
	if c.delegated && slices.ContainsFunc(told, func(a string) bool { return a != "…" }) {
		c.reported = c.tool + "(" + strings.Join(told, ", ") + ")"
	}
	c.label = c.tool + "(" + strings.Join(args, ", ") + ")"
	c.whole = c.tool + "(" + strings.Join(all, ", ") + ")"
	c.key = c.tool + "(" + strings.Join(keyParts, ", ") + ")"
	if path == "" {
		c.command = command
	}
	c.short = c.tool + "(" + oneLine(engine.Truncate(cmp.Or(path, command, first), callShortBytes)) + ")"
	action := toolAction(c.tool, command)
	c.reads = action == actRead || action == actSearch
	c.acts = append(c.acts, x.fileActions(c.tool, path, command)...)
	if len(pathless) > 0 && len(c.acts) == 1 {
		for _, s := range pathless {
			c.edits = append(c.edits, fileText{c.acts[0].path, s})
		}
	}
	for _, e := range c.edits {
		c.wroteWhole = c.wroteWhole || command == "" && x.wroteWhole(c, e.path)
	}
	if command != "" && strings.ContainsAny(command, " \t\n") {
		c.reads = c.reads || shellReads(command)
		c.edits = append(c.edits, shellEdits(command)...)
	}
	return c
}

// delegationArgs are the arguments in which a call gives another agent its instructions.
var delegationArgs = []string{"prompt", "instructions", "task"}

// delegationWords is the fewest words instructions to another agent have: a sentence or
// more, not a search query or a name.
const delegationWords = 12

// instructions reports whether the argument k of a call, of value s, gives another agent its
// instructions: one of delegationArgs, of delegationWords words or more.
func instructions(k, s string) bool {
	return slices.Contains(delegationArgs, k) && len(strings.Fields(s)) >= delegationWords
}

// shellCall reads a command a text-protocol agent wrote in a fenced block.
func (x *extractor) shellCall(cmd string) *call {
	c := &call{seq: x.next(), tool: "shell"}
	line := oneLine(cmd)
	c.label = "`" + engine.Truncate(line, callCommandBytes) + "`"
	c.whole = "`" + oneLine(engine.Truncate(line, wholeCommandBytes)) + "`"
	c.key = "shell(" + line + ")"
	c.command = line
	c.short = "`" + engine.Truncate(line, callShortBytes) + "`"
	if acts, edits, ok := x.sweCommand(cmd); ok {
		c.acts, c.edits, c.reads = acts, edits, len(acts) > 0 && acts[0].action == actRead
	} else {
		c.acts = x.fileActions("shell", "", cmd)
		c.reads = shellReads(cmd)
		c.edits = shellEdits(cmd)
	}
	x.use.note(cmd, c.seq, fromAgentCall)
	return c
}

// SWE-agent's text protocol has commands of its own besides the shell's (its tools, written
// in a fenced block as a shell command is): "open <file> [<line>]" shows a file and makes it
// the open one, "create <file>" creates and opens it, "edit <from>:<to>" followed by the new
// lines and "end_of_edit" replaces lines of the open file, and "search_file", "search_dir"
// and "find_file" search. An edit's lines are the text it writes, not commands.
var sweEdit = regexp.MustCompile(`^edit \d+:\d+\s*$`)

// sweCommand returns the file actions of cmd, and the text it writes, when it is one of
// SWE-agent's commands (see above), and records the file it opens.
func (x *extractor) sweCommand(cmd string) ([]fileAct, []fileText, bool) {
	first, rest, _ := strings.Cut(strings.TrimSpace(cmd), "\n")
	words := strings.Fields(first)
	if len(words) == 0 {
		return nil, nil, false
	}
	arg := func(i int) string {
		if i < len(words) {
			return strings.Trim(words[i], `"'`)
		}
		return ""
	}
	switch {
	case words[0] == "open" && (len(words) == 2 || len(words) == 3) && engine.IsPathLike(arg(1)):
		x.openFile = arg(1)
		return []fileAct{{arg(1), actRead}}, nil, true
	case words[0] == "create" && len(words) == 2 && engine.IsPathLike(arg(1)):
		x.openFile = arg(1)
		return []fileAct{{arg(1), actCreate}}, nil, true
	case sweEdit.MatchString(first) && strings.HasSuffix(strings.TrimSpace(rest), "end_of_edit"):
		if x.openFile == "" {
			return nil, nil, true
		}
		text := strings.TrimSuffix(strings.TrimSpace(rest), "end_of_edit")
		return []fileAct{{x.openFile, actEdit}}, []fileText{{x.openFile, text}}, true
	case words[0] == "search_file" || words[0] == "search_dir" || words[0] == "find_file":
		var acts []fileAct
		for _, w := range words[min(2, len(words)):] { // (the term first, then where)
			if w = strings.Trim(w, `"'`); engine.IsPathLike(w) {
				acts = append(acts, fileAct{w, actSearch})
			}
		}
		return acts, nil, true
	}
	return nil, nil, false
}

// settle records the outcome of c from its output; failed is set by structure (an error
// result, a non-zero return code) when known.
func (x *extractor) settle(c *call, output string, failed, known bool, detail string) {
	c.output = output
	c.outSeq = x.next()
	x.use.note(output, c.outSeq, fromOutput)
	switch {
	case known && failed && c.reads && strings.TrimSpace(withoutReturnCode(output)) == "":
		// grep and find exit 1 when nothing matches: an answer, not a failure.
		c.status, c.detail = callOK, ""
		c.output = "no matches"
	case known && failed:
		c.status, c.detail = callFailed, cmp.Or(detail, errorLine(output))
	case known:
		c.status = callOK
	case !c.reads:
		if line, ok := rejectedEdit(output); ok {
			c.status, c.detail = callFailed, line
		} else if line := failureLine(output); line != "" {
			c.status, c.detail = callFailed, line
		} else if first := firstLine(output); errorReply(first) {
			c.status, c.detail = callFailed, first
		} else {
			c.status = callOK
		}
	default:
		c.status = callOK
	}
	if c.detail != "" {
		c.detail = oneLine(engine.Truncate(c.detail, errorLineBytes))
	}
	x.settleActs(c.acts, c.status == callFailed)
	if c.status == callOK {
		// An earlier failure of the same call is resolved, and of the same command run
		// again with more to it (`git push` by `git push --set-upstream origin main`).
		for _, e := range x.failures[c.key] {
			e.fixedBy = c
		}
		delete(x.failures, c.key)
		if c.command != "" && len(x.failures) <= maxLooseFailures {
			for k, fs := range x.failures {
				if f := fs[0]; f.tool == c.tool && f.command != "" && extends(c.command, f.command) {
					for _, e := range fs {
						e.fixedBy = c
					}
					delete(x.failures, k)
				}
			}
		}
	} else {
		x.failures[c.key] = append(x.failures[c.key], c)
	}
}

// maxLooseFailures bounds the failures open at once that a success is compared with as a
// command run again with more to it (each comparison reads both command lines).
const maxLooseFailures = 64

// extends reports whether the command line later is earlier run again with more to it: the
// same program, every word of earlier among its words, and more words.
func extends(later, earlier string) bool {
	lw, ew := strings.Fields(later), strings.Fields(earlier)
	if len(ew) == 0 || len(lw) <= len(ew) || lw[0] != ew[0] {
		return false
	}
	have := make(map[string]int, len(lw))
	for _, w := range lw {
		have[w]++
	}
	for _, w := range ew {
		if have[w] == 0 {
			return false
		}
		have[w]--
	}
	return true
}

// editRejected opens SWE-agent's answer to an edit its linter rejected: the edit was not
// applied ("Your proposed edit has introduced new syntax error(s). Please understand the fixes
// and retry your edit commmand.\n\nERRORS:\n- E999 IndentationError: unexpected indent …").
const editRejected = "Your proposed edit has introduced new syntax error"

// rejectedEdit returns, for an output that says an edit was rejected (editRejected), what
// the failure line says: "not applied: " and the first error it lists.
func rejectedEdit(output string) (string, bool) {
	output = strings.TrimSpace(withoutReturnCode(output))
	if !strings.HasPrefix(output, editRejected) {
		return "", false
	}
	why := "syntax error"
	if _, errs, ok := strings.Cut(output, "\nERRORS:\n"); ok {
		first, _, _ := strings.Cut(errs, "\n")
		if first = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(first), "- ")); first != "" {
			why = first
		}
	}
	return "not applied: " + why, true
}

// returnCodes read the exit status agents and tools print with an output:
// mini-swe-agent's "<returncode>N</returncode>", "Exit code: N", "exit status N".
var returnCodes = []*regexp.Regexp{
	regexp.MustCompile(`^\s*<returncode>\s*(-?\d+)\s*</returncode>`),
	regexp.MustCompile(`(?im)^\s*(?:exit code|exit status|return code|returncode)[:= ]\s*(-?\d+)\s*$`),
}

// returnCode returns the exit status an output reports, if it reports one.
func returnCode(output string) (int, bool) {
	for _, re := range returnCodes {
		if m := re.FindStringSubmatch(output); m != nil {
			if rc, err := strconv.Atoi(m[1]); err == nil {
				return rc, true
			}
		}
	}
	return 0, false
}

// withoutReturnCode is an observation without its return code and output tags.
func withoutReturnCode(output string) string {
	output = returnCodes[0].ReplaceAllString(output, "")
	return strings.NewReplacer("<output>", "", "</output>", "").Replace(output)
}

// failureEnd matches the lines that say a program or a test run failed, where they say it:
// at the end of its output (the last lines), not anywhere in a listing.
var failureEnd = regexp.MustCompile(`^(?:[A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Interrupt)\b.*|Traceback \(most recent call last\):.*|--- FAIL: .*|FAILED\b.*|FAIL\b.*|=+ .*\bfailed\b.*|error(?:\[[A-Z0-9]+\])?:.*|fatal:.*|panic:.*|.*: command not found|.*: No such file or directory|.*Segmentation fault.*)$`)

// failureLine returns the line that says the output of a run failed: the last of its last
// five non-empty lines matching failureEnd, or, when that is a bare verdict ("FAIL"), a more
// telling one above it; "" when none matches.
func failureLine(output string) string {
	lines := strings.Split(strings.TrimRight(output, " \t\r\n"), "\n")
	seen := 0
	found := ""
	for i := len(lines) - 1; i >= 0 && seen < 5; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "<") {
			continue
		}
		seen++
		if !failureEnd.MatchString(l) {
			continue
		}
		if found == "" {
			found = l
		}
		if !bareVerdict(l) {
			return l
		}
	}
	return found
}

// bareVerdict reports whether a failure line says only that something failed.
func bareVerdict(l string) bool {
	switch strings.TrimRight(l, "!. ") {
	case "FAIL", "FAILED":
		return true
	}
	return false
}

// errorLine returns the line of an error output worth quoting: its last line matching
// failureEnd, else its first non-empty line.
func errorLine(output string) string {
	if l := failureLine(output); l != "" {
		return l
	}
	for _, l := range strings.Split(output, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// shellReads reports whether every simple command of a command line only reads, searches
// or lists (its output is content, not an outcome).
func shellReads(cmdline string) bool {
	some := false
	for _, simple := range splitShell(cmdline) {
		words := strings.Fields(simple)
		if len(words) == 0 || words[0] == "cd" {
			continue
		}
		some = true
		switch shellAction(words) {
		case actRead, actSearch:
		default:
			switch words[0][strings.LastIndexByte(words[0], '/')+1:] {
			case "echo", "printf", "head", "tail", "wc", "sort", "uniq", "cut", "awk", "xargs", "true", "pwd", "which", "git":
			default:
				return false
			}
		}
	}
	return some
}

// shellEdits returns the text shell commands write into files: a here-document redirected
// to a file (cat <<EOF > f), and sed -i substitutions (their replacement).
func shellEdits(cmdline string) []fileText {
	var out []fileText
	for _, h := range hereDocs(cmdline) {
		if j := strings.LastIndexByte(h.line, '>'); j >= 0 {
			if f := strings.Fields(h.line[j+1:]); len(f) > 0 && !strings.HasPrefix(f[0], "<<") {
				out = append(out, fileText{strings.Trim(f[0], `'"`), h.body})
			}
		}
	}
	for _, simple := range splitShell(cmdline) {
		words := strings.Fields(simple)
		if len(words) < 3 || words[0] != "sed" || shellAction(words) != actEdit {
			continue
		}
		if script, file, ok := sedScript(simple); ok {
			out = append(out, fileText{file, sedText(script)})
		}
	}
	return out
}

// hereDoc is a here-document of a command line: the line that opens it (cat <<'EOF' > f),
// its body, and where the body and its closing delimiter lie in the command line
// (cmdline[lo:hi]).
type hereDoc struct {
	line, body string
	lo, hi     int
}

// hereDocs returns the here-documents of cmdline, in order; an unclosed one ends the search.
func hereDocs(cmdline string) []hereDoc {
	var out []hereDoc
	for off := 0; ; {
		i := strings.Index(cmdline[off:], "<<")
		if i < 0 {
			return out
		}
		i += off
		start := strings.LastIndexByte(cmdline[:i], '\n') + 1
		nl := strings.IndexByte(cmdline[i:], '\n')
		if nl < 0 {
			return out
		}
		lo := i + nl + 1
		line := cmdline[start : i+nl]
		op := strings.TrimPrefix(cmdline[i:i+nl], "<<")
		if strings.HasPrefix(op, "<") { // a here-string (<<< word) has no body
			off = i + len("<<<")
			continue
		}
		dash := strings.HasPrefix(op, "-") // <<- strips leading tabs, the delimiter's too
		spec := strings.Fields(strings.TrimPrefix(op, "-"))
		if len(spec) == 0 {
			off = i + len("<<")
			continue
		}
		delim := strings.Trim(spec[0], `'"\`)
		if delim == "" {
			off = i + len("<<")
			continue
		}
		// The body runs to the first line that is the delimiter.
		end, hi := -1, 0
		for at := lo; at <= len(cmdline); {
			eol := strings.IndexByte(cmdline[at:], '\n')
			if eol < 0 {
				eol = len(cmdline) - at
			}
			l := strings.TrimSuffix(cmdline[at:at+eol], "\r")
			if dash {
				l = strings.TrimLeft(l, "\t")
			}
			if l == delim {
				end, hi = at, min(at+eol+1, len(cmdline))
				break
			}
			at += eol + 1
		}
		if end < 0 {
			off = i + len("<<")
			continue
		}
		body := strings.TrimSuffix(cmdline[lo:end], "\n")
		out = append(out, hereDoc{line: line, body: body, lo: lo, hi: hi})
		off = hi
	}
}

// sedScript returns the quoted script of a sed command line and the file it edits (its last
// word).
func sedScript(cmd string) (script, file string, ok bool) {
	words := strings.Fields(cmd)
	file = strings.Trim(words[len(words)-1], `'"`)
	for _, q := range []byte{'\'', '"'} {
		i := strings.IndexByte(cmd, q)
		j := strings.LastIndexByte(cmd, q)
		if i >= 0 && j > i {
			return cmd[i+1 : j], file, true
		}
	}
	return "", "", false
}

// sedText returns the text a sed script writes: the replacements of its s commands and the
// text of its a, i and c commands.
func sedText(script string) string {
	var out []string
	for _, cmd := range strings.Split(script, ";") {
		cmd = strings.TrimLeft(strings.TrimSpace(cmd), "0123456789,$/^ ")
		switch {
		case len(cmd) > 3 && cmd[0] == 's':
			if parts := strings.Split(cmd[2:], cmd[1:2]); len(parts) >= 2 {
				out = append(out, parts[1])
			}
		case len(cmd) > 2 && (cmd[0] == 'a' || cmd[0] == 'i' || cmd[0] == 'c') && (cmd[1] == '\\' || cmd[1] == ' '):
			out = append(out, strings.TrimSpace(cmd[2:]))
		}
	}
	return strings.Join(out, "\n")
}

// patchTexts returns the lines an apply_patch body adds, per file.
func patchTexts(patch string) []fileText {
	var out []fileText
	var cur *fileText
	for _, line := range strings.Split(patch, "\n") {
		t := strings.TrimSpace(line)
		for _, prefix := range []string{"*** Update File: ", "*** Add File: "} {
			if p, ok := strings.CutPrefix(t, prefix); ok {
				out = append(out, fileText{path: strings.TrimSpace(p)})
				cur = &out[len(out)-1]
			}
		}
		if cur != nil && strings.HasPrefix(line, "+") {
			cur.text += line[1:] + "\n"
		}
	}
	return out
}

// shellBlocks returns the commands in the bash/sh/shell fenced code blocks of an assistant
// text: the calls of text-protocol agents.
func shellBlocks(text string) []string {
	var out []string
	engine.EachFence(text, func(lang, body string) {
		if cmd := strings.TrimSpace(body); engine.ShellFence(lang) && cmd != "" {
			out = append(out, cmd)
		}
	})
	return out
}

// oneLine collapses white space runs to one space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

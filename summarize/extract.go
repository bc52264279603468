package summarize

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

// ExtractiveOptions configure ExtractiveSummary. Zero values take the defaults.
type ExtractiveOptions struct {
	// MaxTokens bounds the summary, as measured by Count. Default 2048.
	MaxTokens int64
	// Count measures text in tokens. Default ApproxTokens.
	Count func(string) int
}

// ApproxTokens estimates tokens as one per four bytes, rounded up.
func ApproxTokens(s string) int { return (len(s) + 3) / 4 }

// Headings of the extractive summary, in output order. An anchor that uses them (a previous
// extractive summary) is merged section by section; any other anchor is kept whole, as
// far as the budget allows, under extEarlier.
const (
	extEarlier   = "Earlier summary"
	extRequests  = "User requests (verbatim)"
	extPending   = "Where it stopped"
	extStatement = "Latest assistant statements"
	extErrors    = "Errors"
	extFiles     = "Files (what was done to each)"
	extCalls     = "Tool calls"
	extOutputs   = "Tool output excerpts"
	extIdents    = "Identifiers"
	// extLegacyIdents is the heading that held files and identifiers together before the
	// ledger; anchors written then are still read.
	extLegacyIdents = "Files and identifiers"
)

var extSections = []string{extEarlier, extRequests, extPending, extStatement, extErrors, extFiles, extCalls, extOutputs, extIdents}

// Caps on single items, in bytes, before the token budget is applied.
const (
	extRequestBytes   = 2400
	extStatementBytes = 1200
	extErrorBytes     = 240
	extArgBytes       = 100
	extIdentBytes     = 120
	extStatements     = 3 // latest assistant statements kept
	extIntentBytes    = 400
	extExcerptBytes   = 240
	extExcerptLines   = 3
	extExcerptMin     = 8 // shorter outputs ("ok", "Done") say nothing an excerpt should keep
	extShortBytes     = 60
)

// extOmit is the priority of an item said elsewhere in the summary: never written.
const extOmit = 1 << 30

// extItem is one line (or quoted block) of the extractive summary.
type extItem struct {
	section string
	seq     int // chronological position; anchor items come first
	prio    int // lower is kept first
	text    string
}

// ExtractiveSummary returns a deterministic summary of in.Messages built from the
// conversation itself, without a model: every user request quoted verbatim (long ones cut in
// the middle), the latest assistant statements, errors, the tool calls made with their key
// arguments, and the file paths and identifiers mentioned. A previous summary (in.Anchor) is
// folded in: an extractive one section by section, any other one as an "Earlier summary"
// section. When everything does not fit opt.MaxTokens, the first and the latest user
// requests, the latest statement and the latest errors are kept first, then progressively
// older items. Few-shot demonstrations (SWE-agent's "--- DEMONSTRATION ---" turns) are left
// out. Instructions are quoted at the top (at most a quarter of the budget); the rest of the
// summary fits what remains. The same input always gives the same output.
func ExtractiveSummary(in engine.SummaryInput, opt ExtractiveOptions) string {
	if opt.MaxTokens <= 0 {
		opt.MaxTokens = 2048
	}
	if opt.Count == nil {
		opt.Count = ApproxTokens
	}
	ins := strings.TrimSpace(in.Instructions)
	x := extractor{terms: instructionTerms(ins)}
	x.anchor(in.Anchor)
	x.messages(engine.Summarizable(in.Messages))
	x.finish()
	if ins == "" {
		return x.render(opt)
	}
	head := "Instructions for this summary:\n" + extQuote(ins)
	for n := len(head); opt.Count(head) > int(opt.MaxTokens)/4 && n > 16; {
		n = n * 3 / 4
		head = "Instructions for this summary:\n" + extQuote(engine.Truncate(ins, n))
	}
	if opt.Count(head) > int(opt.MaxTokens)/4 {
		return x.render(opt)
	}
	opt.MaxTokens -= int64(opt.Count(head) + 1)
	return head + "\n\n" + x.render(opt)
}

// extDemonstrationMarkers mark few-shot demonstrations: worked examples of another task.
var extDemonstrationMarkers = []string{"--- DEMONSTRATION ---", "Here is a demonstration of how to correctly accomplish this task"}

func extIsDemonstration(text string) bool {
	for _, m := range extDemonstrationMarkers {
		if strings.Contains(text, m) {
			return true
		}
	}
	return false
}

type extractor struct {
	items  []extItem
	seq    int
	idents map[string]int // identifier → index in items
	files  ledger
	// terms are the words of the caller's instructions: tool outputs that hold them are
	// excerpted first.
	terms []string
	// openErrors are the error items of each call key not yet followed by a success of the
	// same call; lastShell is the key of the latest shell command of a text-protocol agent.
	openErrors     map[string][]int
	lastShell      string
	shellActs      []fileAct // the file actions of lastShell, until its observation
	lastShellLabel string
	openFile       string // the file an "open" tool opened last
	// pending state: the latest assistant text, the latest call, the calls without a result.
	lastIntent  string
	intentWhole bool // the last intent is the whole latest statement
	lastCall    int
	openCalls   map[string]int
	// prioritization state
	requests   []int // indexes of request items
	statements []int
}

func (x *extractor) add(section, text string, prio int) int {
	x.seq++
	x.items = append(x.items, extItem{section: section, seq: x.seq, prio: prio, text: text})
	return len(x.items) - 1
}

// ident records an identifier, or a file in the ledger; a later mention moves it to the end
// (more recent).
func (x *extractor) ident(s string) {
	s = strings.Trim(s, " \t\"'`,;:()[]{}<>")
	if len(s) < 3 || len(s) > extIdentBytes || strings.ContainsAny(s, "\n\r") {
		return
	}
	if extPathLike(s) {
		x.file(s, actMention)
		return
	}
	if x.idents == nil {
		x.idents = make(map[string]int)
	}
	if i, ok := x.idents[s]; ok {
		x.seq++
		x.items[i].seq = x.seq
		return
	}
	x.idents[s] = x.add(extIdents, "- "+s, 0)
}

// anchor folds in a previous summary.
func (x *extractor) anchor(a string) {
	a = strings.TrimSpace(a)
	if a == "" {
		return
	}
	sections := parseExtractive(a)
	if sections == nil {
		x.add(extEarlier, a, 0)
		return
	}
	for _, name := range append(extSections, extLegacyIdents) {
		for _, it := range sections[name] {
			switch name {
			case extRequests:
				x.requests = append(x.requests, x.add(name, it, 0))
			case extStatement:
				x.statements = append(x.statements, x.add(name, it, 0))
			case extIdents, extLegacyIdents:
				x.ident(strings.TrimPrefix(it, "- "))
			case extFiles:
				path, acts, _ := strings.Cut(strings.TrimPrefix(it, "- "), ": ")
				x.file(path, actMention)
				if f := x.files.files[path]; f != nil && acts != "" {
					f.prior = acts
				}
			case extPending:
				// Where an earlier part stopped is superseded by this part's end; kept only
				// when there is room.
				x.items[x.add(name, it, 0)].prio = 50
			default:
				x.add(name, it, 0)
			}
		}
	}
}

// parseExtractive splits an extractive summary into its sections' items, or returns nil when
// a is not one.
func parseExtractive(a string) map[string][]string {
	if !strings.HasPrefix(a, "## ") {
		return nil
	}
	known := map[string]bool{extLegacyIdents: true}
	for _, s := range extSections {
		known[s] = true
	}
	out := make(map[string][]string)
	cur := ""
	for _, line := range strings.Split(a, "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			cur = strings.TrimPrefix(line, "## ")
			if !known[cur] {
				return nil
			}
		case cur == extEarlier:
			// Free text kept from an earlier non-extractive anchor: one item.
			if n := len(out[cur]); n > 0 {
				out[cur][n-1] += "\n" + line
			} else if strings.TrimSpace(line) != "" {
				out[cur] = append(out[cur], line)
			}
		case cur == "" || strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "- "):
			out[cur] = append(out[cur], line)
		default:
			n := len(out[cur])
			if n == 0 {
				return nil
			}
			out[cur][n-1] += "\n" + line
		}
	}
	return out
}

// extQuote renders text as a list item whose continuation lines are indented.
func extQuote(text string) string {
	return "- " + strings.ReplaceAll(strings.TrimSpace(text), "\n", "\n  ")
}

func extMessageText(m *compactorv1.Message) string {
	var parts []string
	for _, p := range m.GetParts() {
		if t := p.GetText(); t != nil && strings.TrimSpace(t.GetText()) != "" {
			parts = append(parts, strings.TrimSpace(t.GetText()))
		}
	}
	return strings.Join(parts, "\n")
}

func (x *extractor) messages(msgs []*compactorv1.Message) {
	calls := map[string]int{}      // tool call id → item index
	keys := map[string]string{}    // tool call id → call key
	labels := map[string]string{}  // tool call id → short label
	acts := map[string][]fileAct{} // tool call id → its file actions, until its result
	x.openCalls, x.lastCall = map[string]int{}, -1
	for _, m := range msgs {
		switch m.GetKind() {
		case compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT, compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY:
			continue
		}
		text := extMessageText(m)
		switch m.GetRole() {
		case compactorv1.Role_ROLE_USER:
			switch {
			case text == "":
			case extIsDemonstration(text):
				// A few-shot demonstration of another task: not the user's request.
			case extIsObservation(text):
				// A text-protocol agent's tool output posing as a user turn.
				x.observation(text)
			default:
				x.requests = append(x.requests, x.add(extRequests, extQuote(engine.Truncate(text, extRequestBytes)), 0))
				x.scanIdents(text)
			}
		case compactorv1.Role_ROLE_ASSISTANT:
			if text != "" {
				x.statements = append(x.statements, x.add(extStatement, extQuote(engine.Truncate(text, extStatementBytes)), 0))
				x.lastIntent = text
				x.scanIdents(text)
				for _, cmd := range extShellBlocks(text) {
					x.lastCall = x.add(extCalls, "- shell: "+extOneLine(engine.Truncate(cmd, extArgBytes*2)), 0)
					x.lastShell = "shell(" + extOneLine(cmd) + ")"
					x.lastShellLabel = "shell(" + extOneLine(engine.Truncate(cmd, extShortBytes)) + ")"
					x.settleActs(x.shellActs, false) // an earlier block without an observation
					x.shellActs = x.fileActions("shell", "", cmd)
				}
			}
		}
		for _, p := range m.GetParts() {
			if tc := p.GetToolCall(); tc != nil {
				line, key, short, a := x.callLine(tc)
				id := tc.GetToolCallId()
				calls[id], keys[id], labels[id], acts[id] = x.add(extCalls, "- "+line, 0), key, short, a
				x.lastCall, x.openCalls[id] = calls[id], calls[id]
			}
			if tr := p.GetToolResult(); tr != nil {
				id := tr.GetToolCallId()
				x.settleActs(acts[id], x.result(tr, calls, keys, labels[id]))
				delete(x.openCalls, id)
				delete(acts, id)
			}
		}
	}
	// Calls whose outcome the range does not hold.
	x.settleActs(x.shellActs, false)
	ids := make([]string, 0, len(acts))
	for id := range acts {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return calls[ids[i]] < calls[ids[j]] })
	for _, id := range ids {
		x.settleActs(acts[id], false)
	}
}

// extObservationPrefixes start the tool outputs that text-protocol agents (mini-swe-agent,
// SWE-agent without function calling, ReAct loops) send back as user messages.
var extObservationPrefixes = []string{"<returncode>", "<output>", "<tool_result", "<function_results>",
	"Observation:", "OBSERVATION:", "[Tool result", "Tool output:"}

func extIsObservation(text string) bool {
	for _, p := range extObservationPrefixes {
		if strings.HasPrefix(text, p) {
			return true
		}
	}
	return false
}

// extShellBlocks returns the commands in the bash/sh/shell fenced code blocks of an
// assistant text: the tool calls of text-protocol agents.
func extShellBlocks(text string) []string {
	var out []string
	for rest := text; ; {
		i := strings.Index(rest, "```")
		if i < 0 {
			return out
		}
		rest = rest[i+3:]
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			return out
		}
		lang := strings.TrimSpace(rest[:nl])
		body := rest[nl+1:]
		j := strings.Index(body, "```")
		if j < 0 {
			return out
		}
		switch lang {
		case "bash", "sh", "shell", "console", "zsh":
			if cmd := strings.TrimSpace(body[:j]); cmd != "" {
				out = append(out, cmd)
			}
		}
		rest = body[j+3:]
	}
}

// extKeyArgs are the tool-call arguments worth keeping, most telling first.
var extKeyArgs = []string{"path", "file_path", "filepath", "filename", "file", "command", "cmd", "query", "pattern",
	"url", "old_str", "new_str", "name", "id", "action", "reservation_id", "user_id", "order_id", "thought"}

var extKeyArgRank = func() map[string]int {
	m := make(map[string]int, len(extKeyArgs))
	for i, k := range extKeyArgs {
		m[k] = i
	}
	return m
}()

// callLine renders a tool call as name(arg=value, …) with at most three key arguments, and
// returns its key (the tool and its path and command arguments, which identify a retry of
// the same call), a short label (the tool and its path or command) and what it does to the
// files it names, to record once its outcome is known.
func (x *extractor) callLine(tc *compactorv1.ToolCallPart) (line, key, short string, acts []fileAct) {
	name := tc.GetToolName()
	if name == "" {
		name = "tool"
	}
	in := strings.TrimSpace(tc.GetInputJson())
	var obj map[string]json.RawMessage
	if in == "" || in == "{}" {
		return name + "()", name + "()", name + "()", nil
	}
	if err := json.Unmarshal([]byte(in), &obj); err != nil {
		return name + "(" + extOneLine(engine.Truncate(in, extArgBytes)) + ")", name + "(" + in + ")", name + "(…)", nil
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ri, iok := extKeyArgRank[keys[i]]
		rj, jok := extKeyArgRank[keys[j]]
		switch {
		case iok && jok:
			return ri < rj
		case iok != jok:
			return iok
		}
		return keys[i] < keys[j]
	})
	args := make([]string, 0, 3)
	var path, command, firstArg string
	defer func() {
		primary := cmp.Or(path, command, firstArg)
		short = name + "(" + extOneLine(engine.Truncate(primary, extShortBytes)) + ")"
	}()
	var keyArgs []string
	for _, k := range keys {
		var s string
		if err := json.Unmarshal(obj[k], &s); err != nil {
			s = string(obj[k])
		} else if r, ok := extKeyArgRank[k]; (ok && r < 5) || k == "id" || strings.HasSuffix(k, "_id") || strings.HasSuffix(k, "Id") {
			x.ident(s) // paths, file names and ids are identifiers
		}
		if r, ok := extKeyArgRank[k]; ok && r <= extKeyArgRank["cmd"] {
			keyArgs = append(keyArgs, k+"="+s)
			switch {
			case r < extKeyArgRank["command"] && path == "":
				path = s
			case r >= extKeyArgRank["command"] && command == "":
				command = s
			}
		}
		if strings.HasPrefix(strings.TrimSpace(s), "*** Begin Patch") {
			patchActions(s, func(path, action string) { acts = append(acts, fileAct{path, action}) })
		}
		if len(args) < 3 {
			args = append(args, k+"="+extOneLine(engine.Truncate(s, extArgBytes)))
		}
		if firstArg == "" {
			firstArg = s
		}
	}
	if len(keys) > len(args) {
		args = append(args, "…")
	}
	acts = append(acts, x.fileActions(name, path, command)...)
	return name + "(" + strings.Join(args, ", ") + ")", name + "(" + strings.Join(keyArgs, ", ") + ")", "", acts
}

func extOneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

var extErrWord = regexp.MustCompile(`\b(?:[A-Za-z]*Error|ERROR|error|[A-Za-z]*Exception|Traceback|panic|FAIL|FAILED|fatal|Fatal)\b`)

// extErrHints are substrings every line extErrWord matches contains; they let extErrLine
// skip most lines without running the regexp.
var extErrHints = []string{"rror", "ERROR", "xception", "Traceback", "panic", "FAIL", "atal"}

// extErrLine returns the first line of s that reports an error, or "".
func extErrLine(s string) string {
	for s != "" {
		line := s
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		for _, h := range extErrHints {
			if strings.Contains(line, h) {
				if extErrWord.MatchString(line) {
					return line
				}
				break
			}
		}
	}
	return ""
}

// result marks failed calls, records the errors a tool result reports and whether it
// settles an earlier error of the same call, and excerpts a successful output. It reports
// whether the call failed.
func (x *extractor) result(tr *compactorv1.ToolResultPart, calls map[string]int, keys map[string]string, label string) (failed bool) {
	kind, body := engine.ToolOutputText(tr.GetOutput())
	var line string
	switch kind {
	case "error", "denied":
		line = kind + ": " + extOneLine(extFirstLine(body))
	default:
		if m := extErrLine(body); m != "" {
			line = extOneLine(m)
		}
	}
	id := tr.GetToolCallId()
	if i, ok := calls[id]; ok && kind != "result" {
		x.items[i].text += " → " + kind
	}
	name := tr.GetToolName()
	if name == "" {
		if i, ok := calls[id]; ok {
			name, _, _ = strings.Cut(strings.TrimPrefix(x.items[i].text, "- "), "(")
		}
	}
	if line == "" {
		x.settle(keys[id], -1)
		if label == "" {
			label = name
		}
		x.excerpt(label, body)
		return false
	}
	if name != "" {
		line = name + ": " + line
	}
	x.settle(keys[id], x.add(extErrors, "- "+engine.Truncate(line, extErrorBytes), 0))
	return true
}

func extFirstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			return l
		}
	}
	return ""
}

var extBacktick = regexp.MustCompile("`([^`\n]{3,120})`")

// extSourceExt are file extensions that make a bare word a file name.
var extSourceExt = map[string]bool{}

func init() {
	for _, e := range strings.Fields("go py rs ts tsx js jsx mjs java kt c h cc cpp hpp cs rb php swift sh md json yaml yml toml proto sql txt cfg ini html css lock mod sum") {
		extSourceExt[e] = true
	}
}

// scanIdents records code spans and path-like words of a user or assistant text.
func (x *extractor) scanIdents(text string) {
	for _, m := range extBacktick.FindAllStringSubmatch(text, -1) {
		x.ident(m[1])
	}
	start := -1
	for i := 0; i <= len(text); i++ {
		sep := i == len(text)
		if !sep {
			switch text[i] {
			case ' ', '\t', '\n', '\r', '"', '\'', '`', '(', ')', '[', ']', '{', '}', '<', '>', ',', ';', '=', '|':
				sep = true
			}
		}
		switch {
		case !sep && start < 0:
			start = i
		case sep && start >= 0:
			if w := strings.TrimRight(text[start:i], ".:!?"); extPathLike(w) {
				x.ident(w)
			}
			start = -1
		}
	}
}

// extPathLike reports whether w looks like a file path (a/b/c.go, ./x, /etc/hosts) or a
// file name with a source extension (main.go).
func extPathLike(w string) bool {
	if len(w) < 3 || len(w) > extIdentBytes || strings.Contains(w, "://") || strings.HasPrefix(w, "//") {
		return false
	}
	letter := false
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			letter = true
		case c >= '0' && c <= '9', c == '_', c == '-', c == '.', c == '@', c == '/':
		default:
			return false
		}
	}
	if !letter {
		return false
	}
	slashes := strings.Count(w, "/")
	last := w[strings.LastIndexByte(w, '/')+1:]
	dot := strings.LastIndexByte(last, '.')
	hasExt := dot > 0 && extSourceExt[last[dot+1:]]
	if slashes == 0 {
		return hasExt
	}
	if strings.Contains(w, "//") || last == "" && slashes == 1 {
		return false
	}
	return hasExt || slashes >= 2 || strings.HasPrefix(w, "./") || strings.HasPrefix(w, "../")
}

// render chooses items by priority within the budget and writes them section by section in
// chronological order.
func (x *extractor) render(opt ExtractiveOptions) string {
	x.prioritize()
	order := make([]int, len(x.items))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ia, ib := x.items[order[a]], x.items[order[b]]
		if ia.prio != ib.prio {
			return ia.prio < ib.prio
		}
		return ia.seq > ib.seq // newer first within a priority
	})
	budget := int(opt.MaxTokens)
	headerCost := map[string]int{}
	for _, s := range extSections {
		headerCost[s] = opt.Count("## "+s+"\n") + 1 // + the blank line between sections
	}
	used := 0
	chosen := make([]bool, len(x.items))
	opened := map[string]bool{}
	for _, i := range order {
		it := x.items[i]
		if it.prio >= extOmit {
			continue
		}
		cost := opt.Count(it.text + "\n")
		if !opened[it.section] {
			cost += headerCost[it.section]
		}
		if used+cost > budget {
			// A free-form anchor is one big item, and the first and latest requests, the
			// latest statement and error must not vanish: keep what fits of them.
			if it.section != extEarlier && it.prio >= 0 {
				continue
			}
			h := 0
			if !opened[it.section] {
				h = headerCost[it.section]
			}
			for room := budget - used - h - 12; room >= 8; room = room * 3 / 4 {
				text := engine.Truncate(it.text, room*2) // ~2 bytes per token is a safe bound for most text
				if c := opt.Count(text+"\n") + h; used+c <= budget {
					x.items[i].text = text
					chosen[i], opened[it.section] = true, true
					used += c
					break
				}
			}
			continue
		}
		chosen[i], opened[it.section] = true, true
		used += cost
	}
	for {
		out := x.write(chosen)
		if opt.Count(out) <= budget {
			return out
		}
		// Token counts are not exactly additive: drop the lowest-priority chosen item.
		dropped := false
		for k := len(order) - 1; k >= 0; k-- {
			if chosen[order[k]] {
				chosen[order[k]] = false
				dropped = true
				break
			}
		}
		if !dropped {
			return out
		}
	}
}

// prioritize ranks items: the first and latest user requests, the latest statement and the
// latest error first; then other requests, statements and errors; tool calls; identifiers;
// the earlier summary's free text competes with the requests.
func (x *extractor) prioritize() {
	if n := len(x.requests); n > 0 {
		x.items[x.requests[0]].prio = -10
		x.items[x.requests[n-1]].prio = -10
	}
	for k, i := range x.statements {
		switch {
		case k == len(x.statements)-1:
			x.items[i].prio = 3 // its last paragraph leads "Where it stopped"
			if x.intentWhole {
				x.items[i].prio = extOmit // … and is all of it
			}
		case k >= len(x.statements)-extStatements:
			x.items[i].prio = 3
		default:
			x.items[i].prio = 100 // older statements are superseded
		}
	}
	lastErr := -1
	for i := range x.items {
		it := &x.items[i]
		if it.prio != 0 {
			continue
		}
		switch it.section {
		case extRequests:
			it.prio = 1
		case extEarlier:
			it.prio = 2
		case extErrors:
			it.prio = 4
			if lastErr < 0 || it.seq > x.items[lastErr].seq {
				lastErr = i
			}
		case extCalls:
			it.prio = 5
		case extIdents:
			it.prio = 6
		}
	}
	if lastErr >= 0 {
		x.items[lastErr].prio = -8
	}
}

func (x *extractor) write(chosen []bool) string {
	var b strings.Builder
	for _, s := range extSections {
		var idx []int
		for i, it := range x.items {
			if chosen[i] && it.section == s {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		sort.Slice(idx, func(a, c int) bool { return x.items[idx[a]].seq < x.items[idx[c]].seq })
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "## %s\n", s)
		for _, i := range idx {
			b.WriteString(x.items[i].text)
			b.WriteString("\n")
		}
	}
	return b.String()
}

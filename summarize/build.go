package summarize

import (
	"cmp"
	"encoding/json"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/clip"
)

// Building the summary's items from what the walk gathered: each item is one line (or quoted
// block) of one section, with a priority, and, for the items chosen by value, the names it
// states and a base value.

// Priorities: negative ones are kept first, most negative first, whatever the budget allows;
// prioChosen items are chosen by value (render.go).
const (
	prioRequestEnds = -10 // the first and the latest request not kept beside the summary
	prioIntent      = -9
	prioPending     = -8
	prioPlan        = -7 // the latest plan survives every compaction (the check keeps the paths, not the plan)
	prioFiles       = -6 // the ledger, short: every path the agent named (the summary check's rule)
	prioLastAction  = -5
	prioLastError   = -4
	prioEarlier     = -3
	prioChosen      = 0
)

// Worth of an item beyond the values it shows, by what it tells an engineer taking over.
const (
	worthRequest     = 3   // the user's own words: what the work is for
	worthEdit        = 4   // a file the agent changed: the state the next turn builds on
	worthEditShown   = 1.0 // … with what its last edit wrote and how the run after it went: the state of the work
	worthDefines     = 3   // … when it wrote the file whole, the names it defines: what the work after it calls
	worthRead        = 1.5 // a file it read or searched: where it looked, so it need not look again
	worthNamedFile   = 0.2 // a file only named: a pointer, seldom needed
	worthOpenError   = 2   // an error not fixed yet: the next turn must deal with it
	worthPending     = 2   // a call waiting for its output, whole: what produced the output the next turn reads
	worthFixedError  = 0.8 // an error and what fixed it: the fix is a decision worth knowing
	worthCall        = 0.5 // a command and its result: evidence, superseded as the work moves on
	worthUsedResult  = 1.5 // … whose output the agent went on to use: a value it relies on
	worthStaleRead   = 0.1 // a read of files the agent changed afterwards: what they held before, superseded
	worthEcho        = 0.1 // the output of a tool call that wrote a file whole: the file back, which the ledger states
	worthNote        = 0.3 // a remark of the agent
	worthFinding     = 1.5 // … stating a finding or a decision: what it learned, what it chose
	worthEarlier     = 0.3 // a line an earlier summary carried: context, already summarized once
	worthEarlierOpen = 1   // … an error it left open, or the work it said was pending: still to deal with
	// worthCarried is added for each value an item shows that the agent wrote again later
	// (usage.go) and no chosen item shows yet, for at most carriedCap of them: beyond a few
	// values a line is a list, not a statement.
	worthCarried = 1
	carriedCap   = 6
	// recencyFloor scales the worth of the range's oldest item; the newest counts whole: the
	// latest state matters most, older work is still context.
	recencyFloor = 0.5
)

// findingPhrases mark an agent's statement of what it found or decided.
var findingPhrases = []string{"the issue", "the problem", "the bug", "the error", "root cause", "because", "caused by",
	"this means", "turns out", "it seems", "confirms", "found", "the fix", "fixed", "instead", "decided", "i will", "i'll",
	"we need", "should be", "must be", "works", "passes", "now returns"}

// finding reports whether an agent's statement says what it found or decided.
func finding(text string) bool {
	l := strings.ToLower(text)
	for _, p := range findingPhrases {
		if strings.Contains(l, p) {
			return true
		}
	}
	return false
}

// item is one line (or quoted block) of the summary.
type item struct {
	section string
	seq     int
	prio    int
	text    string
	// from and to are the events the item came from (to 0: from alone), which its citation
	// names; 0 for an item carried from an earlier summary, whose text holds its citations.
	from, to int
	cite     string // " [m12–18]", set by add
	// base is what the item is worth beyond the values it shows; carried are the values it
	// shows that the agent wrote again later.
	base    float64
	carried []string
	// group, when not 0, makes the items that share it alternatives, shortest first: at
	// most one of them is written, and a longer one replaces a shorter one chosen before.
	group int
	// dropped is set on a carried line the range says anew (weighPriorErrors).
	dropped bool
}

// build turns what the walk gathered into items.
func (x *extractor) build() {
	x.weighPriorErrors()
	for _, p := range x.prior {
		if !p.dropped {
			x.add(p)
		}
	}
	x.buildRequests()
	x.buildStopped()
	x.buildPlan()
	x.buildErrors()
	x.buildFiles()
	x.buildCalls()
	x.buildNotes()
	if len(x.items) == 0 {
		// Nothing but what the summary leaves out: say what that was, so the summary is
		// never empty.
		switch {
		case x.demos > 0:
			x.add(item{section: secNotes, prio: prioIntent, text: "- the summarized part held only a few-shot demonstration of another task, left out"})
		case len(x.kept) > 0:
			x.add(item{section: secNotes, prio: prioIntent, text: "- the summarized part held only the requests kept verbatim after this summary"})
		}
	}
}

// citeText writes citations an earlier summary gave, each after a space, as an item's cite.
func citeText(cites []engine.Citation) string {
	var b strings.Builder
	for _, c := range cites {
		b.WriteString(" ")
		b.WriteString(c.String())
	}
	return b.String()
}

// add adds it with its citation and the values it shows that the agent carried on.
func (x *extractor) add(it item) {
	if it.from > 0 {
		first, last := x.posAt[it.from], x.posAt[max(it.from, it.to)]
		it.cite += " " + engine.Cite(first, last)
	}
	it.carried = x.use.carriedWords(it.text, max(it.seq, it.from))
	x.items = append(x.items, it)
}

// alternatives adds items that say the same thing at growing length, as one group.
func (x *extractor) alternatives(its ...item) {
	x.groups++
	for _, it := range its {
		it.group = x.groups
		x.add(it)
	}
}

// buildRequests quotes the requests not kept beside the summary: the first and the latest
// first, then the others by value.
func (x *extractor) buildRequests() {
	for k, r := range x.requests {
		// The cap keeps the most of a long request's words (what the next turn uses); the
		// summary check appends whole every line it cut.
		it := item{section: secRequests, seq: r.seq, from: r.seq, text: quote(engine.Truncate(r.text, requestBytes)), base: worthRequest}
		if k == 0 || k == len(x.requests)-1 {
			it.prio = prioRequestEnds
		}
		x.add(it)
	}
}

// buildStopped says where the range stopped: the last intent, the last action with its
// outcome, and the calls still waiting for a result.
func (x *extractor) buildStopped() {
	if n := len(x.statements); n > 0 {
		last := x.statements[n-1]
		p := lastParagraph(last.text, intentBytes)
		x.add(item{section: secStopped, seq: last.seq, from: last.seq, prio: prioIntent, text: "- " + lastIntentPrefix + oneLine(p)})
	}
	var last *call
	for _, c := range x.calls {
		if (c.status == callOK || c.status == callFailed || c.status == callRefused && c.outSeq > 0) && (last == nil || c.seq > last.seq) {
			last = c
		}
	}
	for _, c := range x.calls {
		if c.status != callPending {
			continue
		}
		short := item{section: secStopped, seq: c.seq, from: c.seq, prio: prioPending, text: "- " + waitingPrefix + clip.Prefix(c.label, callCommandBytes)}
		if len(c.whole) <= len(c.label) {
			x.add(short)
			continue
		}
		long := short
		long.prio, long.base, long.text = prioChosen, worthPending, "- "+waitingPrefix+c.whole
		x.alternatives(short, long)
	}
	x.buildPriorStopped(len(x.statements) > 0, last != nil, len(x.calls) > 0)
	if last != nil {
		// What a read or a search found is what the next turn acts on: more of it.
		first := excerptBytes
		if last.reads {
			first = excerptBytesLastRead
		}
		lines, _ := x.callLines(last, first, excerptBytesLong)
		short := item{section: secStopped, seq: last.seq, from: last.seq, to: last.outSeq, prio: prioLastAction, text: "- " + lastActionPrefix + lines[0]}
		if lines[1] == lines[0] {
			x.add(short)
		} else {
			// More of it, in its place (not again under the calls, its start said twice).
			long := short
			long.prio, long.base, long.text = prioChosen, x.callWorth(last), "- "+lastActionPrefix+lines[1]
			x.alternatives(short, long)
		}
		last.shown = true
	}
}

// buildPriorStopped carries where the anchor's range stopped: each of its lines the range
// says anew (a newer intent, a newer action, calls of its own) as an earlier note, the
// others as where it stopped, for nothing newer replaced them.
func (x *extractor) buildPriorStopped(intent, action, calls bool) {
	for _, l := range x.priorStopped {
		t := unbullet(l)
		var newer bool
		prio := prioIntent
		switch {
		case strings.HasPrefix(t, lastIntentPrefix):
			newer = intent
		case strings.HasPrefix(t, lastActionPrefix):
			newer, prio = action, prioLastAction
		default: // waiting for a result, or a line of another form
			newer, prio = calls, prioPending
		}
		switch {
		case newer && prio == prioIntent && x.priorNote(strings.TrimPrefix(t, lastIntentPrefix)):
			// The earlier summary's notes end with the statement its last intent quoted.
		case newer:
			x.add(item{section: secNotes, text: "- earlier, " + t, base: worthEarlier})
		default:
			x.add(item{section: secStopped, seq: -1, prio: prio, text: l})
		}
	}
}

// priorNote reports whether the earlier summary carries text as a note of its own, its
// citations aside.
func (x *extractor) priorNote(text string) bool {
	text, _ = engine.CutCitations(text)
	for _, p := range x.prior {
		if n, _ := engine.CutCitations(unbullet(p.text)); p.section == secNotes && n == text {
			return true
		}
	}
	return false
}

// buildPlan keeps the latest plan in full.
func (x *extractor) buildPlan() {
	steps := x.todo
	if steps == nil {
		steps = x.priorPlan
	}
	for i, s := range steps {
		x.add(item{section: secPlan, seq: i, from: x.todoSeq, prio: prioPlan, text: s})
	}
}

// buildErrors lists the failed calls: open ones (the latest first), then those a later
// success of the same call resolved.
func (x *extractor) buildErrors() {
	var latest *item
	for _, c := range x.calls {
		if c.status != callFailed || c.shown {
			continue // the last action says its failure
		}
		text := "- " + c.short + ": " + cmp.Or(c.detail, "failed")
		it := item{section: secErrors, seq: c.seq, from: c.seq, to: c.outSeq, text: text, base: worthOpenError}
		if f := c.fixedBy; f != nil {
			it.text += fixedSuffix + x.editedBetween(c, f)
			it.base, it.to = worthFixedError, f.outSeq
		}
		x.add(it)
		if f := c.fixedBy; f == nil {
			latest = &x.items[len(x.items)-1]
		}
	}
	if latest != nil {
		latest.prio = prioLastError
	}
	x.buildRefusals()
}

// fixedSuffix follows an error that a later run of the same call fixed.
const fixedSuffix = " → fixed: the same call succeeded later"

// priorError is an earlier summary's line of a failed call (anchorError): the call as the
// line names it, what failed, the line without its citations, whether it was fixed already,
// and where it stands among the carried lines.
type priorError struct {
	short, detail, text string
	fixed               bool
	at                  int
}

// weighPriorErrors weighs an earlier summary's open failures against the range: the latest
// run of the same call decides (a name cut short spans lines, and anchorError carries such
// a line as written). When it succeeded the failure is
// fixed (worth less: a decision, no longer to deal with); when it failed the same way the
// range's own line says so, and the earlier one goes; else it stays open.
func (x *extractor) weighPriorErrors() {
	for _, e := range x.priorErrors {
		if e.fixed {
			continue
		}
		var latest *call
		for _, c := range x.calls {
			if c.short == e.short && (c.status == callOK || c.status == callFailed) {
				latest = c
			}
		}
		switch p := &x.prior[e.at]; {
		case latest == nil:
		case latest.status == callOK:
			p.text += fixedSuffix
			p.base = worthEarlier
		case e.detail == cmp.Or(latest.detail, "failed"):
			p.dropped = true
		}
	}
}

// The line that counts the harness's refusals (buildRefusals), which the next summary reads
// back (anchorRefusals): refusedPrefix, the count, "message" or "messages", refusedWhat, and
// refusedLatest with the latest refusal's first line. Counts stop at maxRefusals.
const (
	refusedPrefix = "the harness refused "
	refusedWhat   = " of the agent's (no command of theirs ran)"
	refusedLatest = "; the latest: "
	maxRefusals   = 1_000_000
)

// buildRefusals says how often the harness refused the agent's messages (an earlier
// summary's count included) and its latest words: a format the agent keeps getting wrong is
// an error to deal with while no command has run since, and worth knowing after.
func (x *extractor) buildRefusals() {
	n := min(x.priorRefusals+len(x.refusals), maxRefusals)
	if n == 0 {
		return
	}
	what := "1 message"
	if n > 1 {
		what = strconv.Itoa(n) + " messages"
	}
	it := item{section: secErrors, base: worthFixedError, cite: citeText(x.priorRefusalCites)}
	latest := x.priorRefusalLatest // the range's latest refusal, else the anchor's
	if k := len(x.refusals); k > 0 {
		r := x.refusals[k-1]
		latest = oneLine(engine.Truncate(firstLine(r.text), errorLineBytes))
		it.seq, it.from, it.to = r.seq, x.refusals[0].seq, r.seq
		it.base = worthOpenError // until a command runs after it
		for _, c := range x.calls {
			if c.seq > r.seq && (c.status == callOK || c.status == callFailed) {
				it.base = worthFixedError
				break
			}
		}
	}
	it.text = "- " + refusedPrefix + what + refusedWhat
	if latest != "" {
		it.text += refusedLatest + latest
	}
	x.add(it)
}

// editedBetween says which file the agent changed last between the failure of c and the
// success f of the same call: what fixed it ("" when it changed none).
func (x *extractor) editedBetween(c, f *call) string {
	path := ""
	for _, e := range x.calls {
		if e.seq > c.seq && e.seq < f.seq && e.status == callOK {
			for _, a := range e.acts {
				if writes(a.action) {
					path = a.path
				}
			}
		}
	}
	if path == "" {
		return ""
	}
	return ", after the agent changed " + path
}

// Caps on what a ledger line quotes of the last edit, in bytes.
const (
	editLineBytes  = 80
	editLinesBytes = 240
)

// buildFiles writes the ledger: each file with what was done to it, and, at more cost, what
// its last edit wrote and how the run after it went; files only named get a line each, chosen
// by worth.
func (x *extractor) buildFiles() {
	lastEdit := map[string]*call{} // path → the last successful call that wrote into it
	for _, c := range x.calls {
		if c.status == callFailed || c.status == callRefused || c.status == callUnanswered {
			continue // it wrote nothing, or nothing the range knows of
		}
		for _, e := range c.edits {
			if strings.TrimSpace(e.text) != "" {
				lastEdit[x.files.key(e.path)] = c
			}
		}
	}
	files := make([]*ledgerFile, 0, len(x.files.files))
	for _, f := range x.files.files {
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].seq < files[j].seq })
	for _, f := range files {
		if len(f.acts) == 0 && (f.prior == "" || f.prior == namedOnly) {
			// Named, nothing done to it in the range: "not opened" only when no summary
			// before it may have said otherwise.
			said := cmp.Or(f.prior, namedNotOpened)
			x.add(item{section: secFiles, seq: f.seq, from: f.first, to: f.seq, text: "- " + f.path + ": " + said, base: worthNamedFile})
			continue
		}
		base := worthRead
		if f.changed() {
			base = worthEdit
		}
		short := item{section: secFiles, seq: f.seq, from: f.first, to: f.seq, text: f.line(""), base: base, prio: prioFiles,
			cite: citeText(f.priorCites)}
		if len(f.priorCites) > 0 && f.seq <= x.anchorEnd {
			// Only the earlier summary named it (its last mention, so its first too, is one of
			// the anchor's events): its own citations say where, one to the
			// summary that carried them adds nothing (and would grow with every compaction).
			short.from, short.to = 0, 0
		}
		c := lastEdit[f.path]
		if c == nil {
			x.add(short)
			continue
		}
		shown := worthEditShown
		if x.definesWhole(c, f.path) {
			shown += worthDefines
		}
		long := short
		long.prio, long.base = prioChosen, base+shown
		long.text = f.line(x.editStatement(c, f.path, editLinesBytes))
		long.to = max(long.to, c.outSeq)
		if run := x.runAfter(c, f.path); run != nil {
			lines, _ := x.callLines(run, excerptBytes)
			long.text += "; then " + lines[0]
			long.to = max(long.to, run.outSeq)
		}
		mid := short
		mid.prio, mid.base = prioChosen, base+shown/2
		mid.text = f.line(x.editStatement(c, f.path, editLineBytes))
		x.alternatives(short, mid, long)
	}
}

// editStatement says what the edit c wrote into path, within limit bytes: for a file it
// wrote whole, the definitions it holds (their signature lines); else the first lines of
// code it wrote (its comments only when it wrote nothing else: what the code does is in the
// code, and a file's opening comment lines would fill the statement).
func (x *extractor) editStatement(c *call, path string, limit int) string {
	whole := x.wroteWhole(c, path)
	var defs, lines, said []string // said: the comment lines
	comments := commentsOf(path)
	for _, l := range strings.Split(x.editText(c, path), "\n") {
		if l = oneLine(l); l == "" {
			continue
		}
		if comment(l, comments) {
			said = append(said, l)
			continue
		}
		lines = append(lines, l)
		if definition(l) {
			defs = append(defs, strings.TrimRight(l, " {:"))
		}
	}
	if len(lines) == 0 {
		lines = said
	}
	what := "last edit wrote "
	if whole && len(defs) > 0 {
		// What the file provides before how it implements it, and that before what tests it.
		sort.SliceStable(defs, func(i, j int) bool { return definitionRank(defs[i]) < definitionRank(defs[j]) })
		what, lines = "it defines ", defs
	}
	var b strings.Builder
	for i, l := range lines {
		if i > 0 && b.Len()+len(l) > limit {
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("`" + clip.Prefix(l, editLineBytes) + "`")
	}
	if b.Len() == 0 {
		return ""
	}
	return what + b.String()
}

// wroteWhole reports whether the call c wrote path whole (a write or a create, not an edit).
func (x *extractor) wroteWhole(c *call, path string) bool {
	for _, a := range c.acts {
		if x.files.key(a.path) == x.files.key(path) && (a.action == actWrite || a.action == actCreate) {
			return true
		}
	}
	return false
}

// editText is the text the call c wrote into path, its last edit of it.
func (x *extractor) editText(c *call, path string) string {
	var text string
	for _, e := range c.edits {
		if x.files.key(e.path) == x.files.key(path) {
			text = e.text
		}
	}
	return text
}

// definesWhole reports whether the call c wrote path whole with definitions in it: what the
// file provides, which the work after it calls.
func (x *extractor) definesWhole(c *call, path string) bool {
	if !x.wroteWhole(c, path) {
		return false
	}
	for _, l := range strings.Split(x.editText(c, path), "\n") {
		if definition(oneLine(l)) {
			return true
		}
	}
	return false
}

// definitionStarts begin the lines that define something in the languages agents edit.
var definitionStarts = []string{"def ", "async def ", "class ", "fn ", "pub fn ", "pub(crate) fn ", "struct ", "pub struct ", "enum ", "pub enum ",
	"impl ", "trait ", "pub trait ", "pub mod ", "func ", "type ", "interface ", "function ", "export function ", "export class ", "export const ", "const ", "module "}

// Comment lines, by the language a file's extension names: C-family files comment with //
// and /* */ (their # lines are directives or attributes, never comments), scripts and
// configuration with #. A file of another or no extension (prose among them, whose # lines
// are headings) has no line taken for a comment.
var (
	slashComments = []string{"//", "/*", "*/", "* "}
	hashComments  = []string{"#"}
	commentsByExt = map[string][]string{
		".c": slashComments, ".h": slashComments, ".cc": slashComments, ".cpp": slashComments, ".hpp": slashComments,
		".go": slashComments, ".rs": slashComments, ".java": slashComments, ".kt": slashComments, ".scala": slashComments,
		".swift": slashComments, ".cs": slashComments, ".js": slashComments, ".jsx": slashComments, ".mjs": slashComments,
		".ts": slashComments, ".tsx": slashComments,
		".py": hashComments, ".sh": hashComments, ".bash": hashComments, ".zsh": hashComments, ".rb": hashComments,
		".pl": hashComments, ".yaml": hashComments, ".yml": hashComments, ".toml": hashComments, ".cfg": hashComments,
	}
)

// commentsOf returns the prefixes of the comment lines of the file at path (nil: none known).
func commentsOf(path string) []string {
	return commentsByExt[strings.ToLower(filepath.Ext(path))]
}

// comment reports whether l, a line (on one line, trimmed) of a file whose comment lines
// start with one of prefixes, is a comment alone.
func comment(l string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(l+" ", p) { // "*" alone is a block comment's blank line
			return true
		}
	}
	return false
}

// definition reports whether a line of code defines a function, type or constant.
func definition(l string) bool {
	for _, p := range definitionStarts {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// definitionRank orders a file's definition lines by what they tell of what it provides:
// exported ones (pub, export) first, then the others, then implementations of a trait or
// type (impl), then tests (a name starting with test or Test).
func definitionRank(l string) int {
	for _, p := range definitionStarts {
		name, ok := strings.CutPrefix(l, p)
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(name, "test") || strings.HasPrefix(name, "Test"):
			return 3
		case p == "impl ":
			return 2
		case strings.HasPrefix(p, "pub") || strings.HasPrefix(p, "export"):
			return 0
		}
		return 1
	}
	return 1
}

// runAfter is the first call after c that ran or tested something (not a read, not a plan)
// and has an outcome: how the edit c of file went. A run after edits of several files is said
// on the line of the file edited last and of those its command names, not repeated on every
// line: nil when another edit that wrote something comes between c and a run that does not
// name file.
func (x *extractor) runAfter(c *call, file string) *call {
	between := false
	for _, r := range x.calls {
		switch {
		case r.seq <= c.seq:
		case r.status == callOK && r.wroteText():
			between = true
		case !r.reads && !r.plan && len(r.edits) == 0 && (r.status == callOK || r.status == callFailed):
			if between && !namesFile(r.label, file) {
				return nil
			}
			return r
		}
	}
	return nil
}

// namesFile reports whether a call's label names file by its base name as a word of its
// own (test_utils.py does not name utils.py).
func namesFile(label, file string) bool {
	base := filepath.Base(file)
	for _, w := range strings.FieldsFunc(label, func(c rune) bool { return strings.ContainsRune(" \t=(),;`'\"", c) }) {
		if filepath.Base(w) == base {
			return true
		}
	}
	return false
}

// buildCalls writes each call not shown as the last action with its outcome and what its
// output said.
func (x *extractor) buildCalls() {
	for _, c := range x.calls {
		if c.shown || c.plan || c.status == callPending || c.status == callUnanswered || c.status == callRefused {
			continue // a plan's call: the plan section holds it; a refused one, the errors (buildRefusals)
		}
		lines, parts := x.callLines(c, excerptBytes, excerptBytesLong, excerptBytesFull)
		var alts []item
		worth := x.callWorth(c)
		for i, line := range lines {
			text := "- " + line
			base := worth
			if c.delegated && c.status == callOK && parts[i] > 0 {
				// Each line of another agent's report is a finding, as the agent's own
				// statement of one is, up to reportFindings of them.
				base = max(base, worthFinding*float64(min(parts[i], reportFindings)))
			}
			if len(alts) == 0 || alts[len(alts)-1].text != text {
				alts = append(alts, item{section: secCalls, seq: c.seq, from: c.seq, to: c.outSeq, text: text, base: base})
			}
		}
		x.alternatives(alts...)
	}
}

// callWorth is the worth of a call's line: more when the agent went on to use its output.
func (x *extractor) callWorth(c *call) float64 {
	if x.stale(c) {
		return worthStaleRead
	}
	if c.status == callOK && c.wroteWhole {
		return worthEcho
	}
	if c.status == callOK && len(x.use.carriedWords(c.output, c.outSeq)) > 0 {
		return worthCall + worthUsedResult
	}
	return worthCall
}

// stale reports whether c read files (and only files) that a later call changed.
func (x *extractor) stale(c *call) bool {
	if !c.reads || len(c.acts) == 0 {
		return false
	}
	for _, a := range c.acts {
		if !x.changedAfter(a.path, c.seq) {
			return false
		}
	}
	return true
}

// changedAfter reports whether a successful call after seq wrote into path.
func (x *extractor) changedAfter(path string, seq int) bool {
	for _, e := range x.calls {
		if e.seq <= seq || e.status != callOK {
			continue
		}
		for _, a := range e.acts {
			if x.files.key(a.path) == x.files.key(path) && writes(a.action) {
				return true
			}
		}
	}
	return false
}

// writes reports whether a file action writes into the file: an edit, a write or a create.
func writes(action string) bool {
	return action == actEdit || action == actWrite || action == actCreate
}

// callLines renders a call with its outcome once for each excerpt limit, in the order of
// limits: "label → ok: excerpt", "label → failed: line", and says how many parts of the
// output each line shows. A failed call is named with every argument it was given (what the
// next turn makes again, mended); a successful one with them too where the limit allows a
// long excerpt, unless it handed another agent a task (its report says more than its
// instructions). The output is ranked once, whatever the number of limits; only the choice
// of parts depends on the limit, so each line is what excerpting the output within that
// limit alone gives. Each call is rendered by one callLines.
func (x *extractor) callLines(c *call, limits ...int) (lines []string, parts []int) {
	lines, parts = make([]string, len(limits)), make([]int, len(limits))
	whole := cmp.Or(c.whole, c.label)
	switch c.status {
	case callFailed:
		for i := range lines {
			lines[i] = whole + " → failed: " + cmp.Or(c.detail, "(no output)")
		}
	case callPending:
		for i := range lines {
			lines[i] = c.label
		}
	case callRefused:
		for i := range lines {
			lines[i] = whole + " → refused by the harness, not run: " + c.detail
		}
	default:
		out := c.output
		if c.delegated {
			out = reportBody(out)
		}
		r := x.rank(out, c.outSeq)
		for i, limit := range limits {
			label := c.label
			switch {
			case c.delegated:
				label = cmp.Or(c.reported, c.label)
			case limit >= excerptBytesLong:
				label = whole
			}
			chosen := r.choose(limit)
			if parts[i] = len(chosen); parts[i] > 0 {
				lines[i] = label + " → " + r.join(chosen)
			} else {
				lines[i] = label + " → ok"
			}
		}
	}
	return lines, parts
}

// ranked is what an output says that the next turn may need, ranked once so that excerpts
// of any length can be cut from it: its parts (for JSON, its scalar fields as key=value; for
// text, its lines but the harness's prompt lines and markup), each cut to excerptLineBytes,
// most worth first.
type ranked struct {
	parts []string // most worth first
	pos   []int    // pos[k] is where parts[k] stands in the output
	sep   string   // what joins the parts of an excerpt
}

// rank splits output, an event at seq, into parts and orders them by worth (rankParts),
// each line of a text output once. Nothing of it depends on an excerpt's length. An empty
// output has no parts.
func (x *extractor) rank(output string, seq int) ranked {
	output = strings.TrimSpace(output)
	if output == "" {
		return ranked{}
	}
	if fields := jsonFields(output); fields != nil {
		return x.rankParts(fields, "; ", seq)
	}
	if note, ok := compactionNote(output); ok && strings.HasPrefix(output, "[pruned: ") {
		// An output an earlier compaction pruned: where it is, not the marker's words.
		return ranked{parts: []string{"pruned earlier" + note}, pos: []int{0}, sep: excerptSep}
	}
	var lines, worded []string
	output, long := withoutHarnessWarning(output)
	seen := map[string]bool{} // a line said again says nothing more (a listing's many __init__.py)
	for _, l := range strings.Split(output, "\n") {
		if note, ok := compactionNote(l); ok && strings.HasPrefix(l, "[… ") {
			l = "[…" + note + " …]" // the middle an earlier compaction cut from the output
		}
		if l = oneLine(l); l != "" && !seen[l] && !strings.HasPrefix(l, "<") && !agentPrompt(l) && !bareLineNumber(l) {
			seen[l] = true
			lines = append(lines, l)
			if !layout(l) {
				worded = append(worded, l)
			}
		}
	}
	if len(worded) > 0 { // else the layout is all the output says ("[]", "---")
		lines = worded
	}
	if long {
		lines = append([]string{elidedNote}, lines...)
	}
	return x.rankParts(lines, excerptSep, seq)
}

// A harness may put advice of its own into an observation: mini-swe-agent, when an output
// is too long, shows its head and tail after a <warning> element ("The output of your last
// command was too long. Please try a different command …"). The advice says nothing the
// command printed; an excerpt says only that the output was cut (elidedNote).
const (
	warningOpen  = "<warning>"
	warningClose = "</warning>"
	elidedNote   = "(too long: the harness showed its head and tail)"
)

// withoutHarnessWarning returns output without its harness <warning> element, and whether
// the warning said the output was too long. The warning is mini-swe-agent's only where the
// harness puts it: first in the observation (after its <returncode>), with the output's
// head right after it; a <warning> elsewhere is what the command printed.
func withoutHarnessWarning(output string) (string, bool) {
	rest := output
	if strings.HasPrefix(rest, "<returncode>") {
		_, rest, _ = strings.Cut(rest, "\n")
	}
	rest = strings.TrimLeft(rest, " \t\r\n")
	if !strings.HasPrefix(rest, warningOpen) {
		return output, false
	}
	n := strings.Index(rest, warningClose)
	if n < 0 {
		return output, false
	}
	after := rest[n+len(warningClose):]
	if !strings.HasPrefix(strings.TrimLeft(after, " \t\r\n"), "<output_head>") {
		return output, false
	}
	warning := rest[len(warningOpen):n]
	return output[:len(output)-len(rest)] + "\n" + after, strings.Contains(warning, "too long")
}

// compactionNote returns, for a text holding an earlier compaction's reference to an
// output it pruned or cut (engine.OutputSource), that reference as a summary cites it
// (" [s1a2b3c4d m23]"): the marker's 64-digit hash, cut to an excerpt's line, would leave
// nothing to find the output by.
func compactionNote(text string) (string, bool) {
	hash, i, ok := engine.ParseOutputSource(text)
	if !ok {
		return "", false
	}
	return " " + engine.Citation{Range: engine.SourceRange{First: i, Last: i}}.Qualified(hash).String(), true
}

// layout reports whether a line is layout alone: no letter or digit (a rule, a fence, a
// closing brace), which says nothing an excerpt needs when other lines say something; but
// not a diff's added or removed line ("+}", "-)"), which is a change.
func layout(l string) bool {
	if strings.ContainsFunc(l, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
		return false
	}
	if m := l[:1]; (m == "+" || m == "-") && strings.Trim(l, m+" ") != "" {
		return false
	}
	return true
}

// excerptSep joins the lines of a text output's excerpt.
const excerptSep = " / "

// reportBody is a sub-agent's report without what frames it: the line it opens with to
// address the agent and introduce what follows ("Excellent! Now I have a complete picture.
// Let me provide you with a comprehensive overview:"), which says nothing itself (a first
// line that states something, "Found 3 callers of parse():", stays), and the line Claude
// Code appends for resuming the agent ("agentId: ab81802 (for resuming …)").
func reportBody(report string) string {
	report = strings.TrimSpace(report)
	if first, rest, ok := strings.Cut(report, "\n"); ok && addressesReader(first) && strings.TrimSpace(rest) != "" {
		report = rest
	}
	if i := strings.LastIndex(report, "agentId: "); i >= 0 && strings.Contains(report[i:], "(for resuming") && !strings.Contains(report[i:], "\n") {
		report = report[:i]
	}
	return report
}

// addressesReader reports whether a line ending with ":" introduces what follows to its
// reader ("Let me …", "Here is …", "… for you:") rather than stating something.
func addressesReader(line string) bool {
	l := strings.ToLower(strings.TrimSpace(line))
	if !strings.HasSuffix(l, ":") {
		return false
	}
	for _, w := range []string{"let me ", "here is", "here are", "here's", " you "} {
		if strings.Contains(" "+l, w) {
			return true
		}
	}
	return false
}

// reportFindings bounds the lines of a sub-agent's report that count as findings: beyond a
// few a report is a document, whose further lines are worth the names they carry, so that a
// long one does not crowd out the plan, the errors and the requests.
const reportFindings = 4

// bareLineNumber reports whether an output line is a line number with nothing at it (an
// empty line of a numbered listing: "7:", "12→"): a line number says something only with
// what is at it.
func bareLineNumber(l string) bool {
	l = strings.TrimRight(l, ":→|\t ")
	if l == "" {
		return false
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

// agentPrompt reports whether an output line is an agent harness's prompt state rather than
// output (SWE-agent's "(Open file: …)", "(Current directory: …)", "bash-$").
func agentPrompt(l string) bool {
	return strings.HasPrefix(l, "(Open file:") || strings.HasPrefix(l, "(Current directory:") || l == "bash-$"
}

// Worth of a part of an output.
const (
	partCarried = 1   // for each value the agent wrote again later (up to carriedCap): what it used
	partFailure = 3   // a line saying a run failed: the error an engineer reads first
	partTerm    = 10  // each of the caller's instruction terms: what the caller asked to keep
	partFirst   = 0.1 // divided by its line number: the first lines say what the output is
)

// rankParts scores parts of an output at seq, orders them most worth first (ties keep the
// output's order) and cuts each to excerptLineBytes; sep is what will join them.
func (x *extractor) rankParts(parts []string, sep string, seq int) ranked {
	type scored struct {
		i     int
		score float64
	}
	ss := make([]scored, len(parts))
	for i, p := range parts {
		s := partFirst / float64(i+1)
		s += partCarried * float64(min(len(x.use.carriedWords(p, seq)), carriedCap))
		if failureEnd.MatchString(strings.TrimSpace(p)) {
			s += partFailure
		}
		lp := strings.ToLower(p)
		for _, t := range x.terms {
			if strings.Contains(lp, t) {
				s += partTerm
			}
		}
		ss[i] = scored{i, s}
	}
	sort.SliceStable(ss, func(a, b int) bool { return ss[a].score > ss[b].score })
	r := ranked{parts: make([]string, len(ss)), pos: make([]int, len(ss)), sep: sep}
	for k, s := range ss {
		r.parts[k] = clip.Prefix(parts[s.i], excerptLineBytes)
		r.pos[k] = s.i
	}
	return r
}

// join joins the parts chosen (indexes into r.parts) with r's separator.
func (r ranked) join(chosen []int) string {
	out := make([]string, len(chosen))
	for i, k := range chosen {
		out[i] = r.parts[k]
	}
	return strings.Join(out, r.sep)
}

// choose returns the parts an excerpt within limit bytes takes, as indexes into r.parts in the
// output's order: the parts most worth first, skipping those that would go past limit (the
// first one is always taken), until limit is reached.
func (r ranked) choose(limit int) []int {
	var chosen []int
	used := 0
	for k, p := range r.parts {
		if used+len(p) > limit && len(chosen) > 0 {
			continue
		}
		used += len(p) + len(r.sep)
		chosen = append(chosen, k)
		if used >= limit {
			break
		}
	}
	sort.Slice(chosen, func(a, b int) bool { return r.pos[chosen[a]] < r.pos[chosen[b]] })
	return chosen
}

// jsonFields returns what a JSON object or array states, as parts in document order, or nil
// when s is not JSON: the top object's scalar fields each alone, every other object's
// together, as one record ("key: a=1, b=x",
// key the name the object stands under unless a field holds it, so an id a record is filed by
// stays with the record it names), the scalars of an array of them each alone; repeated parts once.
func jsonFields(s string) []string {
	if s[0] != '{' && s[0] != '[' {
		return nil
	}
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	emit := func(part string) {
		if part != "" && !seen[part] {
			seen[part] = true
			out = append(out, part)
		}
	}
	// owner names the record a nested one belongs to ("flight_number=HAT255"): an object's
	// prices or seats, a part of their own, would read as another record's without it.
	var walk func(key, owner string, v any, root bool)
	walk = func(key, owner string, v any, root bool) {
		switch t := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var fields []string
			ident := ""
			for _, k := range keys {
				if f, ok := scalar(k, t[k]); ok {
					fields = append(fields, f)
					if ident == "" && identKey(k) {
						ident = f
					}
				}
			}
			if root {
				for _, f := range fields {
					emit(f) // the reply itself: each field a part, ranked on its own
				}
				fields = nil
			}
			if len(fields) > 0 {
				record := strings.Join(fields, ", ")
				if key != "" && !strings.Contains(record, "="+key) {
					record = key + ": " + record
				}
				if owner != "" && ident == "" {
					record = owner + " " + record
				}
				emit(record)
			}
			if ident == "" {
				ident = owner
			}
			for _, k := range keys {
				if _, ok := scalar(k, t[k]); !ok {
					walk(k, ident, t[k], false)
				}
			}
		case []any:
			for _, e := range t {
				walk(key, owner, e, false)
			}
		default:
			if f, ok := scalar(key, t); ok {
				emit(f)
			}
		}
	}
	walk("", "", v, true)
	return out
}

// identKey reports whether a JSON key names what identifies its object: an id or a number
// ("id", "user_id", "flight_number", "reservationId", "orderNumber"), or a key that is
// "code" or "name" alone (a "country_code" or "currencyCode" is an attribute of its object,
// not what names it).
func identKey(k string) bool {
	lk := strings.ToLower(k)
	if lk == "code" || lk == "name" {
		return true
	}
	for _, s := range []string{"id", "number"} {
		switch {
		case lk == s, strings.HasSuffix(lk, "_"+s), strings.HasSuffix(lk, "-"+s):
			return true
		case len(k) > len(s) && strings.HasSuffix(lk, s) && unicode.IsUpper(rune(k[len(k)-len(s)])):
			return true // camelCase: reservationId, flightNumber
		}
	}
	return false
}

// scalar renders a JSON scalar under key as key=value (the value alone without a key); ok
// is false for an object, an array and null.
func scalar(key string, v any) (string, bool) {
	switch v.(type) {
	case map[string]any, []any, nil:
		return "", false
	}
	b, _ := json.Marshal(v)
	field := strings.Trim(string(b), `"`)
	if key != "" {
		field = key + "=" + field
	}
	return field, true
}

// buildNotes keeps the agent's statements (the latest too, unless the last intent says all
// of it): their first paragraph, code left out, or, at more cost, most of them with their
// code blocks cut short, and without the blocks a text-protocol agent issued as commands
// (the calls say those).
func (x *extractor) buildNotes() {
	for k, s := range x.statements {
		if k == len(x.statements)-1 && strings.TrimSpace(s.text) == lastParagraph(s.text, intentBytes) {
			break // all of it is the last intent
		}
		short := firstParagraph(withoutFences(s.text), noteBytes)
		long := oneLine(clip.Prefix(shortenFences(withoutCommands(s.text, s.commands)), noteBytesLong))
		if short == "" {
			short = long
		} else if strings.HasSuffix(short, ":") {
			// "The issue is in line 1950:" says nothing without what follows: keep the start of that.
			short = oneLine(clip.Prefix(shortenFences(strings.TrimSpace(s.text)), noteBytes))
		}
		if short == "" {
			continue
		}
		base := worthNote
		if finding(short) {
			base = worthFinding
		}
		x.alternatives(item{section: secNotes, seq: s.seq, from: s.seq, text: "- " + oneLine(short), base: base},
			item{section: secNotes, seq: s.seq, from: s.seq, text: "- " + long, base: base})
	}
}

// withoutCommands is text without its fenced blocks that hold one of cmds.
func withoutCommands(text string, cmds []string) string {
	if len(cmds) == 0 {
		return text
	}
	return mapFences(text, func(code string, closed bool) string {
		if _, body, ok := strings.Cut(code, "\n"); ok && slices.Contains(cmds, strings.TrimSpace(body)) {
			return ""
		}
		if closed {
			code += "```"
		}
		return code
	})
}

// shortenFences is text with each fenced block cut to codeBytes.
func shortenFences(text string) string {
	return mapFences(text, func(code string, closed bool) string {
		if code = clip.Prefix(code, codeBytes); closed {
			code += "```"
		}
		return code
	})
}

// mapFences is text with each ``` fenced block replaced by f(code, closed): code is the block
// from its opening fence up to its closing one (to the end of text when it has none, closed
// false).
func mapFences(text string, f func(code string, closed bool) string) string {
	var b strings.Builder
	rest := text
	for {
		i := strings.Index(rest, "```")
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:i])
		j := strings.Index(rest[i+3:], "```")
		if j < 0 {
			b.WriteString(f(rest[i:], false))
			return b.String()
		}
		b.WriteString(f(rest[i:i+3+j], true))
		rest = rest[i+3+j+3:]
	}
}

// firstParagraph is the first non-empty paragraph of text, cut to n bytes.
func firstParagraph(text string, n int) string {
	for _, p := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if p = strings.TrimSpace(p); p != "" {
			return clip.Prefix(p, n)
		}
	}
	return ""
}

package summarize

import (
	"regexp"
	"sort"
	"strconv"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/internal/clip"
)

// Folding in a previous summary (the anchor), whatever wrote it: every section it holds is
// read (readAnchor) and carried into the new summary's sections, merged with what the new
// range adds. The extractive summary's sections (those of earlier versions of its format
// included), an LLM's markdown sections (`## Heading`, `**Heading**` lines, numbered
// section headings), the summary check's appendix (its Request blocks and files line) and
// the quoted instructions are all read; compactord's source marker and a `Sources:` line are
// metadata, not content. An anchor without any heading is kept whole as the earlier summary.

// Headings of earlier versions of the extractive format, still read in anchors.
const (
	legacyStatements = "Latest assistant statements"
	legacyCalls      = "Tool calls"
	legacyOutputs    = "Tool output excerpts"
	legacyIdents     = "Identifiers"
	legacyFileIdents = "Files and identifiers"
)

// Sections an anchor may hold that the extractive summary does not write: the check's
// appendix, the quoted instructions of the summary, and a names-only list.
const (
	anchorCheck        = "check"
	anchorInstructions = "instructions"
	anchorNames        = "names"
	anchorFragment     = "fragment"
)

// instructionsHeading opens the caller's instructions the extractive summary quotes at its
// top (ExtractiveSummary).
const instructionsHeading = "Instructions for this summary:"

// anchorSection maps each heading an anchor may use (compared without case: sectionFor) to
// the section its items go to.
var anchorSection = map[string]string{
	secEarlier: secEarlier, secRequests: secRequests, secStopped: secStopped, secPlan: secPlan,
	secErrors: secErrors, secFiles: secFiles, secCalls: secCalls, secNotes: secNotes,
	legacyStatements: secNotes, legacyCalls: secCalls, legacyOutputs: secCalls,
	legacyIdents: anchorNames, legacyFileIdents: secFiles,
	strings.TrimPrefix(fidelity.CheckedHeading, "## "): anchorCheck,
	instructionsHeading: anchorInstructions,
	// Claude Code's own summary after it compacted (engine.ContinuedSummary) numbers nine
	// sections, each a known heading, or it falls into the section before it (the user's
	// messages into the errors). Its statement of the request and intent is the task as an
	// earlier summary stated it: kept with the earlier summary's text, which does not vanish.
	"Primary Request and Intent": secEarlier, "Key Technical Concepts": secNotes,
	"Files and Code Sections": secFiles, "Errors and fixes": secErrors,
	"Problem Solving": secNotes, "All user messages": secRequests, "Pending Tasks": secStopped,
	"Current Work": secStopped, "Optional Next Step": secStopped,
}

// anchorSections is anchorSection keyed by its headings in lower case.
var anchorSections = func() map[string]string {
	m := make(map[string]string, len(anchorSection))
	for h, s := range anchorSection {
		m[strings.ToLower(h)] = s
	}
	return m
}()

// sectionFor returns the section of a heading anchorSection names, compared without case.
func sectionFor(heading string) (string, bool) {
	s, ok := anchorSections[strings.ToLower(heading)]
	return s, ok
}

// headingWords map the words of a heading no exact entry of anchorSection names (an LLM's
// own, or engine.SummarySections) to a section, the first match winning: what is still to do
// and where the work stopped before the plan, the plan before the files, and so on.
var headingWords = []struct{ word, section string }{
	{"pending", secStopped}, {"current work", secStopped}, {"next step", secStopped},
	{"where it stopped", secStopped}, {"status", secStopped}, {"progress", secStopped},
	{"plan", secPlan}, {"todo", secPlan}, {"to-do", secPlan},
	{"file", secFiles},
	{"error", secErrors}, {"fix", secErrors},
	{"command", secCalls}, {"tool", secCalls},
	{"request", secRequests}, {"constraint", secRequests}, {"user", secRequests}, {"task", secRequests},
	{"earlier summary", secEarlier},
}

// sectionOf returns the section a heading's items go to: its exact entry, else the first of
// headingWords it contains, else the agent notes.
func sectionOf(heading string) string {
	if s, ok := sectionFor(heading); ok {
		return s
	}
	h := strings.ToLower(heading)
	for _, w := range headingWords {
		if strings.Contains(h, w.word) {
			return w.section
		}
	}
	return secNotes
}

// knownHeading reports whether a numbered line's title names a section a summary is asked
// for (engine.SummarySections) or the extractive summary writes: only such a line opens a
// section, so that a numbered step of a plan stays an item.
func knownHeading(title string) bool {
	if _, ok := sectionFor(title); ok {
		return true
	}
	for _, s := range engine.SummarySections {
		if strings.EqualFold(title, s.Heading) {
			return true
		}
	}
	return false
}

var (
	numberedHeading = regexp.MustCompile(`^\d{1,2}[.)]\s+(.+)$`)
	boldHeading     = regexp.MustCompile(`^\*\*([^*]+?)\*\*:?$`)
)

// heading returns the title of a line that opens a section of a summary: a markdown heading
// ("## Files"), a line in bold ("**Files:**"), a numbered section heading ("3. Files and
// identifiers:", only for the headings of knownHeading) or the extractive summary's quoted
// instructions.
func heading(line string) (string, bool) {
	l := strings.TrimSpace(line)
	if l == instructionsHeading {
		return l, true
	}
	if t := strings.TrimLeft(l, "#"); t != l && len(l)-len(t) <= 6 && strings.HasPrefix(t, " ") {
		return cleanTitle(t), true
	}
	if m := boldHeading.FindStringSubmatch(l); m != nil {
		return cleanTitle(m[1]), true
	}
	if m := numberedHeading.FindStringSubmatch(l); m != nil {
		if t := cleanTitle(m[1]); knownHeading(t) {
			return t, true
		}
	}
	return "", false
}

// cleanTitle strips a heading's emphasis and trailing colon.
func cleanTitle(t string) string {
	t = strings.TrimSpace(strings.Trim(strings.TrimSpace(t), "*_"))
	return strings.TrimSpace(strings.TrimSuffix(t, ":"))
}

// metadata reports whether a line of a summary is about the summary rather than part of
// it: compactord's source marker (engine.SourceMarker), which the summary message carries
// again, and a `Sources:` line.
func metadata(line string) bool {
	l := strings.TrimSpace(line)
	if strings.HasPrefix(l, "Sources:") {
		return true
	}
	_, _, ok := engine.ParseSourceMarker(l)
	return ok && strings.HasPrefix(l, "[compactord source ") && strings.HasSuffix(l, "]")
}

// anchorItem is one item of a previous summary.
type anchorItem struct {
	heading string // as written
	section string // the section it goes to (sectionOf)
	text    string // its lines, continuation lines included
}

// readAnchor splits a previous summary into its items, in order. It returns nil when a has no
// heading at all (a summary written by another tool as plain text): that one is kept whole.
func readAnchor(a string) []anchorItem {
	var out []anchorItem
	cur, sec, headed := "", secEarlier, false
	open := false   // the last item may take continuation lines
	indent := 0     // the indentation of the last item's first line
	leadIn := false // the last item is a lead-in: the list after it is its
	fence := false  // within a fenced block
	for _, line := range strings.Split(a, "\n") {
		if metadata(line) {
			continue
		}
		inRequest := sec == anchorCheck && open
		if strings.TrimSpace(line) == fidelity.CutMarker {
			// What follows, up to the next heading, is the tail of a section the check cut:
			// a fragment of no known section, left out.
			cur, sec, open = "", anchorFragment, false
			continue
		}
		if h, ok := heading(line); ok && !inRequest && !strings.HasPrefix(line, " ") {
			cur, sec, headed, open, leadIn, fence = h, sectionOf(h), true, false, false, false
			continue
		}
		l := strings.TrimSpace(line)
		if l == "" {
			if sec == secEarlier && open {
				out[len(out)-1].text += "\n"
			}
			continue
		}
		// A lead-in is a caption of a section carried as text, outside code, no deeper than
		// the item before it (not a request's or a quoted code's line that ends with ":").
		leadable := sec != secEarlier && sec != anchorCheck && sec != secRequests && sec != secFiles &&
			!fence && !bullet(l) && strings.HasSuffix(l, ":")
		if strings.HasPrefix(l, "```") {
			fence = !fence
		}
		switch {
		case sec == anchorCheck && (fidelity.IsRequestHead(l) || strings.HasPrefix(l, fidelity.FilesNamedPrefix)):
			out = append(out, anchorItem{heading: cur, section: sec, text: l})
			open = !strings.HasPrefix(l, fidelity.FilesNamedPrefix)
		case open && leadable && indentation(line) <= indent:
			// A lead-in ("Still needed for gqc.6:") opens an item of its own, which the list
			// after it belongs to: glued to the item before, its list read as items of their
			// own, a summary could carry the lead-in with the list's last step alone.
			out = append(out, anchorItem{heading: cur, section: sec, text: line})
			indent, leadIn = indentation(line), true
		case open && (sec == secEarlier || sec == anchorCheck || !bullet(l) || indentation(line) > indent || leadIn && indentation(line) >= indent):
			// A line of the item, or an item nested in it (the changes listed under a file,
			// the steps after a lead-in).
			out[len(out)-1].text += "\n" + line
		default:
			out = append(out, anchorItem{heading: cur, section: sec, text: line})
			open, indent, leadIn = true, indentation(line), leadable
		}
	}
	if !headed {
		return nil
	}
	for i := range out {
		out[i].text = dedent(strings.TrimRight(out[i].text, "\n "))
	}
	return out
}

// dedent returns an item without its first line's indentation, on every line that has as
// much (an item of an indented list, its nested items keeping their depth below it).
func dedent(it string) string {
	n := len(it) - len(strings.TrimLeft(it, " "))
	if n == 0 {
		return it
	}
	pad := strings.Repeat(" ", n)
	lines := strings.Split(it, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, pad)
	}
	return strings.Join(lines, "\n")
}

// indentation is the width of a line's leading blanks, a tab counting as four.
func indentation(line string) int {
	n := 0
	for _, c := range line {
		switch c {
		case ' ':
			n++
		case '\t':
			n += 4
		default:
			return n
		}
	}
	return n
}

// bullet reports whether a (trimmed) line starts a list item: "- ", "* ", "• ", "1. ".
func bullet(l string) bool {
	switch {
	case strings.HasPrefix(l, "- "), strings.HasPrefix(l, "* "), strings.HasPrefix(l, "• "):
		return true
	}
	return numberedHeading.MatchString(l)
}

// unbullet returns a list item's text without its marker and the indentation of its
// continuation lines (quote's "  ").
func unbullet(it string) string {
	l := strings.TrimLeft(it, " ")
	for _, p := range []string{"- ", "* ", "• "} {
		if t, ok := strings.CutPrefix(l, p); ok {
			return strings.ReplaceAll(t, "\n  ", "\n")
		}
	}
	return strings.ReplaceAll(l, "\n  ", "\n")
}

// unquote returns a request an LLM quoted whole ("…", “…”, `…`) without its quotes.
func unquote(s string) string {
	for _, q := range [][2]string{{`"`, `"`}, {"“", "”"}, {"`", "`"}} {
		if t, ok := strings.CutPrefix(s, q[0]); ok {
			if t, ok := strings.CutSuffix(t, q[1]); ok && !strings.Contains(t, q[1]) {
				return t
			}
		}
	}
	return s
}

// Carried is what a previous summary holds that every later summary must keep: the user's
// requests it quotes (oldest first, the task first) and the paths of its files ledger.
type Carried struct {
	Requests []string
	Paths    []string
}

// AnchorCarried returns the requests and file paths a previous summary holds, read as the
// extractive summarizer reads an anchor, so that the summary check holds a new summary to
// them as to those of its own range.
func AnchorCarried(a string) Carried {
	x := newExtractor(nil, nil)
	x.anchor(a)
	var c Carried
	for _, r := range x.requests {
		c.Requests = append(c.Requests, r.text)
	}
	for _, f := range x.files.files {
		c.Paths = append(c.Paths, f.path)
	}
	sort.Slice(c.Paths, func(i, j int) bool { return x.files.files[c.Paths[i]].seq < x.files.files[c.Paths[j]].seq })
	return c
}

// anchor folds in a previous summary.
func (x *extractor) anchor(a string) {
	a = strings.TrimSpace(a)
	if a == "" {
		return
	}
	defer func() { x.anchorEnd = x.seq }()
	items := readAnchor(a)
	if items == nil {
		x.use.note(a, 0, fromOutput)
		x.prior = append(x.prior, item{section: secEarlier, text: a, prio: prioEarlier})
		return
	}
	request := func(text string) {
		text = strings.TrimSpace(text)
		text, _ = engine.CutCitations(text)
		text = unquote(text)
		n := fidelity.Normalize(text)
		if n == "" {
			return
		}
		if !readsAsRequest(text) {
			// A tool's output an earlier summary took for a request: a note, not a request.
			x.prior = append(x.prior, item{section: secNotes, text: quote(text), base: worthEarlier})
			return
		}
		// A request the summary held cut (by its own summarizer or the check) and the
		// check's appendix whole: one request, the longer text.
		for i, r := range x.requests {
			switch m := fidelity.Normalize(r.text); {
			case strings.HasPrefix(m, n):
				return
			case strings.HasPrefix(n, m):
				x.requests[i].text = text
				return
			}
		}
		x.requests = append(x.requests, textAt{text: text})
	}
	var plan []string
	for _, it := range items {
		x.use.note(it.text, 0, fromOutput)
		switch it.section {
		case anchorNames:
			// A list of names: nothing said of them.
		case anchorInstructions:
			// The caller's focus for that summary: the new summary quotes its own.
		case anchorFragment:
			// The tail of a section the check cut: no item whole.
		case anchorCheck:
			if rest, ok := strings.CutPrefix(it.text, fidelity.FilesNamedPrefix); ok {
				for _, p := range strings.Split(rest, ", ") {
					if p = strings.TrimSpace(p); p != "" {
						if f := x.file(p, actMention); f != nil && f.prior == "" && len(f.acts) == 0 {
							f.prior = namedOnly
						}
					}
				}
			} else if _, body, ok := strings.Cut(it.text, "\n"); ok {
				request(body)
			}
		case secRequests:
			request(unbullet(it.text))
		case secFiles:
			x.anchorFile(it)
		case secPlan:
			plan = append(plan, it.text)
		default:
			p := item{section: it.section, text: it.text, base: worthEarlier}
			if !bullet(strings.TrimSpace(p.text)) {
				p.text = "- " + p.text
			}
			if it.section == secStopped {
				if it.heading == secStopped {
					// Where the range stopped, unless the new range says it anew
					// (buildStopped).
					x.priorStopped = append(x.priorStopped, it.text)
					continue
				}
				p.section, p.text, p.base = secNotes, "- earlier, "+unbullet(it.text), worthEarlierOpen // an LLM's pending work, current work or next step
			}
			if it.section == secErrors && (x.anchorRefusals(it.text) || x.anchorError(it.text)) {
				continue // counted with the range's own (buildRefusals), or weighed against it (weighPriorErrors)
			}
			if it.section == secErrors && !strings.Contains(it.text, "(resolved") {
				p.base = worthEarlierOpen
			}
			if it.section == secEarlier {
				p.text, p.prio = it.text, prioEarlier
			}
			x.prior = append(x.prior, p)
		}
	}
	if len(plan) > 0 {
		x.priorPlan = plan // the latest plan the anchor holds
	}
}

// anchorRefusals counts the refusals an earlier summary's line says the harness made (a line
// buildRefusals wrote, word for word up to its latest refusal), keeping its citations and
// that refusal's words, and reports whether the line was one.
func (x *extractor) anchorRefusals(line string) bool {
	text, cites := engine.CutCitations(unbullet(line))
	rest, ok := strings.CutPrefix(text, refusedPrefix)
	if !ok {
		return false
	}
	n, rest, _ := strings.Cut(rest, " ")
	k, err := strconv.Atoi(n)
	if err != nil || k <= 0 || k > maxRefusals {
		return false
	}
	what := "messages"
	if k == 1 {
		what = "message"
	}
	rest, ok = strings.CutPrefix(rest, what+refusedWhat)
	if !ok || rest != "" && !strings.HasPrefix(rest, refusedLatest) {
		return false
	}
	x.priorRefusals = min(x.priorRefusals+k, maxRefusals)
	x.priorRefusalCites = append(x.priorRefusalCites, cites...)
	x.priorRefusalLatest = strings.TrimPrefix(rest, refusedLatest)
	return true
}

// anchorError carries an earlier summary's line of a failed call in the form buildErrors
// writes ("`command`: what failed", "tool(path): what failed", perhaps already fixed), one
// line long, and reports whether the line was one: the same failure said by two earlier
// summaries becomes one line with both citations, kept where the first stood among the
// carried lines, and weighPriorErrors weighs it against the range. A line in other words
// (an LLM's, one it marked resolved) is carried as written.
func (x *extractor) anchorError(line string) bool {
	text, cites := engine.CutCitations(unbullet(line))
	if strings.Contains(text, "\n") || strings.Contains(strings.ToLower(text), "(resolved") {
		return false
	}
	short, detail, ok := failedCall(text)
	if !ok {
		return false
	}
	for _, e := range x.priorErrors {
		if e.text == text {
			x.prior[e.at].cite += citeText(cites)
			return true
		}
	}
	fixed := strings.Contains(detail, fixedSuffix)
	it := item{section: secErrors, text: "- " + text, base: worthEarlierOpen, cite: citeText(cites)}
	if fixed {
		it.base = worthEarlier
	}
	x.priorErrors = append(x.priorErrors, priorError{short: short, detail: detail, text: text, fixed: fixed, at: len(x.prior)})
	x.prior = append(x.prior, it)
	return true
}

// failedCall splits an error line as buildErrors writes it into the call's name (a
// backquoted command, or a tool and its argument in brackets) and what failed.
func failedCall(text string) (short, detail string, ok bool) {
	var n int
	switch {
	case strings.HasPrefix(text, "`"):
		n = strings.Index(text[1:], "`: ") + 2 // the closing backquote, then ": "
	case strings.Contains(text, "("):
		n = strings.Index(text, "): ") + 1
	}
	if n <= 1 {
		return "", "", false
	}
	detail = text[n+len(": "):]
	return text[:n], detail, detail != ""
}

// anchorFile carries an item of a previous summary's files ledger: its path with what was
// done to it ("- path: read, edited [m12]"), or every path a line names (a "named, not
// opened" line, an LLM's sentence about a file).
func (x *extractor) anchorFile(it anchorItem) {
	text := unbullet(it.text)
	path, acts, ok := strings.Cut(text, ": ")
	path = strings.Trim(strings.TrimSpace(path), "`*")
	if ok && !strings.ContainsAny(path, " ,") && path != "" {
		if f := x.file(path, actMention); f != nil {
			prior, cites := engine.CutCitations(strings.TrimSpace(acts))
			if named := prior == namedNotOpened || prior == namedOnly; !named || f.prior == "" {
				// (one file under two lines of an earlier ledger: "named" says less than the other)
				f.prior, f.priorCites = prior, cites
			}
		}
		return
	}
	paths := engine.PathsIn(text)
	if len(paths) == 1 && !strings.HasPrefix(text, "named") {
		if f := x.file(paths[0], actMention); f != nil {
			// What another summary wrote of the file, its nested items (the changes, the
			// code) on one line, up to priorFileBytes.
			f.prior = clip.Prefix(oneLine(text), priorFileBytes)
		}
		return
	}
	for _, p := range paths {
		x.file(p, actMention)
	}
}

// priorFileBytes bounds what a files ledger line carries of another summary's text on the
// file (Claude Code's "Files and Code Sections" quote whole functions under each file).
const priorFileBytes = 400

// readsAsRequest reports whether a request an earlier summary quoted reads as one by the
// engine's rules (engine.ClassifyUsers, after a summary): a tool's observation or a
// demonstration does not.
func readsAsRequest(text string) bool {
	m := &compactorv1.Message{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{
		{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: text}}}}}
	return engine.ClassifyUsers([]*compactorv1.Message{m}, true)[0] == engine.UserRequest
}

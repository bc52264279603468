package fidelity

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/summary"
)

// CheckedHeading opens the section Check appends to a summary that dropped requests or
// paths. Its wording is fixed: clients and the measure may look for it.
const CheckedHeading = "## Kept verbatim by the summary check"

// FilesNamedPrefix starts the line of the check's appendix that lists the paths the summary
// dropped.
const FilesNamedPrefix = "Files the summarized part named: "

// CutMarker is the line Check puts where it cut a summary in the middle.
const CutMarker = "… [summary cut by the check] …"

// Haystack is the text a compacted conversation shows a model, whitespace-normalised, for
// verbatim look-ups.
type Haystack struct{ s string }

// NewHaystack builds a Haystack from texts (e.g. a summary) and messages (their text parts,
// tool-call inputs and tool outputs).
func NewHaystack(texts []string, msgs []*compactorv1.Message) Haystack {
	var b strings.Builder
	for _, t := range texts {
		b.WriteString(Normalize(t))
		b.WriteString("\n")
	}
	for _, m := range msgs {
		for _, p := range m.GetParts() {
			switch {
			case p.GetText() != nil:
				b.WriteString(Normalize(p.GetText().GetText()))
			case p.GetToolCall() != nil:
				for _, s := range jsonStrings(p.GetToolCall().GetInputJson()) {
					b.WriteString(Normalize(s))
					b.WriteString("\n")
				}
			case p.GetToolResult() != nil:
				_, out := engine.ToolOutputText(p.GetToolResult().GetOutput())
				b.WriteString(Normalize(out))
			}
			b.WriteString("\n")
		}
	}
	return Haystack{b.String()}
}

// Has reports whether the normalised form of s occurs in h.
func (h Haystack) Has(s string) bool { return strings.Contains(h.s, Normalize(s)) }

// CheckInput is one summary to check.
type CheckInput struct {
	// Summary is the summary text as the summarizer returned it.
	Summary string
	// Range is the summarized range: the messages the summary replaces.
	Range []*compactorv1.Message
	// Kept are the messages that stay verbatim in the compacted conversation beside the
	// summary and do not change with later turns (the head: system, prefaces, pinned).
	Kept []*compactorv1.Message
	// EarlierRequests and EarlierPaths are what the conversation's previous summary carried
	// (the requests it quoted, oldest first, and the paths of its files ledger): the summary
	// must keep them as it keeps those of Range. The earlier requests are numbered before
	// Range's, the first of them the task.
	EarlierRequests, EarlierPaths []string
	// Budget bounds the checked summary in tokens (0: no bound); Count measures text.
	Budget int
	Count  func(string) int
}

// requests returns the requests the summary stands for: the earlier ones (Index -1), then
// Range's.
func (in CheckInput) requests() []Request {
	var out []Request
	for _, r := range in.EarlierRequests {
		if lines := Lines(r); len(lines) > 0 {
			out = append(out, Request{Index: -1, Text: r, Lines: lines})
		}
	}
	return append(out, RangeRequests(in.Range, in.Kept)...)
}

// paths returns the paths the summary must name: the earlier ones and those the earlier
// requests name, then Range's (Paths), each once.
func (in CheckInput) paths(reqs []Request) []string {
	var out []string
	seen := map[string]bool{}
	add := func(ps ...string) {
		for _, p := range ps {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	add(in.EarlierPaths...)
	for _, r := range reqs {
		if r.Index < 0 {
			add(engine.PathsIn(r.Text)...)
		}
	}
	add(Paths(in.Range, reqs)...)
	return out
}

// Check checks a summary with the measure's rules: every request the summary stands for
// (the earlier summary's and the range's; each line of MinLineChars or more) and every path
// the agent or a request named must be in the summary or the kept messages. What is missing
// is appended verbatim under CheckedHeading within the budget: the paths first, in at most a
// quarter of the room, then the requests, whole (or their missing lines), never cut mid-line:
// the task first, then the newest; then the paths left over, all paths together in at most
// half the room until the requests had theirs. Requests that do not fit are folded whole and reported (RequestsDropped).
// When summary and appendix together exceed the budget, the summary is cut in the middle to
// make room (the requests matter more), and a summary over the budget is cut the same way.
// The same input always gives the same output.
func Check(in CheckInput) (string, summary.Check) {
	// A cut summary may have lost lines it retained: check the cut summary again (the
	// appendix only grows, so this settles in a few passes).
	trimmed := false
	for pass := 0; ; pass++ {
		body, appendix, rep := checkOnce(in)
		if !rep.Trimmed || pass == 3 {
			rep.Trimmed = rep.Trimmed || trimmed
			switch {
			case appendix == "":
				return body, rep
			case body == "":
				return appendix, rep
			}
			return body + "\n\n" + appendix, rep
		}
		trimmed = true
		in.Summary = body
	}
}

// checkOnce checks in.Summary and returns it (cut to the budget) and the appendix.
func checkOnce(in CheckInput) (body, appendix string, rep summary.Check) {
	count := in.Count
	if count == nil {
		count = func(s string) int { return (len(s) + 3) / 4 }
	}
	hay := NewHaystack([]string{in.Summary}, in.Kept)
	reqs := in.requests()
	paths := in.paths(reqs)
	rep.RequestsTotal, rep.PathsTotal = len(reqs), len(paths)

	var blocks []string // appendix blocks, in order
	budget := in.Budget
	if budget <= 0 {
		budget = int(^uint(0) >> 2)
	}
	room := budget - count(CheckedHeading) - 4
	fits := func(s string) bool {
		if n := count(s) + 1; n <= room {
			room -= n
			return true
		}
		return false
	}
	// The paths first, in at most a quarter of the room (a few tokens each, and a long task
	// must not crowd them all out); then whole requests; then the paths left over, all
	// paths in at most half the room; then, in what room is left, the missing lines of
	// requests too long to append whole; then the paths still left over.
	var files []string
	var later []string
	pathRoom := room / 4
	pathLeft := room / 2 // what paths may take before the requests had theirs
	// fitsFile takes the room of one more path on the appendix's files line (the line's
	// prefix with the first), within limit.
	fitsFile := func(p string, limit *int) bool {
		s := p + ", "
		if len(files) == 0 {
			s = FilesNamedPrefix + s
		}
		n := count(s) + 1
		if n > *limit || n > pathLeft || !fits(s) {
			return false
		}
		*limit -= n
		pathLeft -= n
		return true
	}
	for _, p := range paths {
		switch {
		case hay.Has(p):
			rep.PathsRetained++
		case fitsFile(p, &pathRoom):
			files = append(files, p)
			rep.PathsAppended++
		default:
			later = append(later, p)
		}
	}
	// The order requests take the room in: the task, then the newest first.
	order := make([]int, 0, len(reqs))
	if len(reqs) > 0 {
		order = append(order, 0)
	}
	for i := len(reqs) - 1; i > 0; i-- {
		order = append(order, i)
	}
	blockOf := make([]string, len(reqs)) // the appended block of each request ("" for none)
	missingOf := make([][]string, len(reqs))
	for _, i := range order {
		r := reqs[i]
		for _, l := range r.Lines {
			if !hay.Has(l) {
				missingOf[i] = append(missingOf[i], l)
			}
		}
		switch {
		case len(missingOf[i]) == 0:
			rep.RequestsRetained++
		case fits(requestBlock(i, r.Text, false)):
			blockOf[i] = requestBlock(i, r.Text, false)
			rep.RequestsAppended++
		}
	}
	noLimit := int(^uint(0) >> 2)
	laterPaths := func() {
		left := later[:0]
		for _, p := range later {
			if fitsFile(p, &noLimit) {
				files = append(files, p)
				rep.PathsAppended++
			} else {
				left = append(left, p)
			}
		}
		later = left
	}
	laterPaths()
	for _, i := range order {
		if len(missingOf[i]) == 0 || blockOf[i] != "" {
			continue
		}
		if b := requestBlock(i, strings.Join(missingOf[i], "\n"), true); fits(b) {
			blockOf[i] = b
			rep.RequestsAppended++
		} else {
			rep.RequestsDropped = append(rep.RequestsDropped, i+1)
		}
	}
	slices.Sort(rep.RequestsDropped)
	pathLeft = noLimit // the requests had their room: the paths left take what remains
	laterPaths()
	for _, b := range blockOf {
		if b != "" {
			blocks = append(blocks, b)
		}
	}
	if len(files) > 0 {
		blocks = append(blocks, FilesNamedPrefix+strings.Join(files, ", "))
	}
	body = strings.TrimSpace(in.Summary)
	bodyBudget := in.Budget
	if len(blocks) > 0 {
		appendix = CheckedHeading + "\n\n" + strings.Join(blocks, "\n\n")
		bodyBudget -= count(appendix) + 2
	}
	if in.Budget > 0 {
		body, rep.Trimmed = fitTokens(body, bodyBudget, count)
	}
	return body, appendix, rep
}

func requestBlock(i int, text string, partial bool) string {
	head := fmt.Sprintf("Request %d", i+1)
	if i == 0 {
		head += " (the task)"
	}
	if partial {
		head += ", lines the summary dropped"
	}
	return head + ":\n" + strings.TrimSpace(text)
}

// fitTokens cuts the middle of s until it counts at most limit tokens; it reports whether
// it cut.
func fitTokens(s string, limit int, count func(string) int) (string, bool) {
	if count(s) <= limit {
		return s, false
	}
	if limit <= 8 {
		return "", true
	}
	n := len(s)
	for n > 0 {
		n = n * 9 / 10
		if t := cut(s, n); count(t) <= limit {
			return t, true
		}
	}
	return "", true
}

// cut keeps the head and tail of s in at most about n bytes with a marker between: whole
// lines (a summary's lines are its facts, and half a line says less than none) when they keep
// at least half of n, else cut at rune boundaries (a summary of a few long lines).
func cut(s string, n int) string {
	if n >= len(s) {
		return s
	}
	h := n * 2 / 3
	t := len(s) - (n - h)
	lh, lt := strings.LastIndexByte(s[:h], '\n')+1, t
	if s[t-1] != '\n' {
		if i := strings.IndexByte(s[t:], '\n'); i >= 0 {
			lt += i + 1
		} else {
			lt = len(s)
		}
	}
	if lh+len(s)-lt >= n/2 {
		return s[:lh] + CutMarker + "\n" + s[lt:]
	}
	for h > 0 && s[h]&0xC0 == 0x80 {
		h--
	}
	for t < len(s) && s[t]&0xC0 == 0x80 {
		t++
	}
	return s[:h] + "\n" + CutMarker + "\n" + s[t:]
}

// requestHead matches the line that opens a request block of the appendix (requestBlock).
var requestHead = regexp.MustCompile(`^Request \d+( \(the task\))?(, lines the summary dropped)?:$`)

// IsRequestHead reports whether line opens a request block of the check's appendix.
func IsRequestHead(line string) bool { return requestHead.MatchString(line) }

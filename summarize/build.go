package summarize

import (
	"cmp"
	"encoding/json"
	"github.com/compactord/compactord/engine"
	"sort"
	"strings"

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

// item is one line (or quoted block) of the summary.
type item struct {
	section string
	seq     int
	prio    int
	text    string
	// base is what the item is worth beyond its names; names are those it states.
	base  float64
	names []string
	// group, when not 0, makes the items that share it alternatives, shortest first: at
	// most one of them is written, and a longer one replaces a shorter one chosen before.
	group int
}

// build turns what the walk gathered into items.
func (x *extractor) build() {
	x.focus()
	x.items = append(x.items, x.prior...)
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
	for i := range x.items {
		x.items[i].names = namesOf(x.items[i].text)
	}
}

func (x *extractor) add(it item) { x.items = append(x.items, it) }

// focus marks the names of the code the agent works on: those of the latest read of each
// file it changed before the end of the range.
func (x *extractor) focus() {
	latest := map[string]*call{} // path → its latest successful read
	for _, c := range x.calls {
		if !c.reads || c.status != callOK {
			continue
		}
		for _, a := range c.acts {
			if a.action == actRead {
				latest[a.path] = c
			}
		}
	}
	for path, c := range latest {
		if f := x.files.files[path]; f == nil || !f.changed() {
			continue
		}
		if x.names.focus == nil {
			x.names.focus = map[string]bool{}
		}
		for _, n := range namesOf(c.output) {
			x.names.focus[n] = true
		}
	}
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
		it := item{section: secRequests, seq: r.seq, text: quote(engine.Truncate(r.text, requestBytes)), base: 3}
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
		x.add(item{section: secStopped, seq: last.seq, prio: prioIntent, text: "- last intent: " + oneLine(p)})
	}
	var last *call
	for _, c := range x.calls {
		if (c.status == callOK || c.status == callFailed) && (last == nil || c.seq > last.seq) {
			last = c
		}
	}
	for _, c := range x.calls {
		if c.status == callPending {
			x.add(item{section: secStopped, seq: c.seq, prio: prioPending, text: "- waiting for the result of: " + clip.Prefix(c.label, callCommandBytes)})
		}
	}
	x.buildPriorStopped(len(x.statements) > 0, last != nil, len(x.calls) > 0)
	if last != nil {
		lines := x.callLines(last, excerptBytes, excerptBytesLong)
		short, long := lines[0], lines[1]
		x.add(item{section: secStopped, seq: last.seq, prio: prioLastAction, text: "- last action: " + short})
		if long != short {
			x.add(item{section: secCalls, seq: last.seq, text: "- " + long, base: 0.5})
		}
		last.shown = true
	}
}

// buildPriorStopped carries where the anchor's range stopped: each of its lines the range
// says anew (a newer intent, a newer action, calls of its own) as an earlier note, the
// others as where it stopped, for nothing newer replaced them.
func (x *extractor) buildPriorStopped(intent, action, calls bool) {
	for _, l := range x.priorStopped {
		t := strings.TrimPrefix(l, "- ")
		var newer bool
		prio := prioIntent
		switch {
		case strings.HasPrefix(t, "last intent:"):
			newer = intent
		case strings.HasPrefix(t, "last action:"):
			newer, prio = action, prioLastAction
		default: // waiting for a result, or a line of another form
			newer, prio = calls, prioPending
		}
		if newer {
			x.add(item{section: secNotes, text: "- earlier, " + t, base: 0.3})
		} else {
			x.add(item{section: secStopped, seq: -1, prio: prio, text: l})
		}
	}
}

// buildPlan keeps the latest plan in full.
func (x *extractor) buildPlan() {
	steps := x.todo
	if steps == nil {
		steps = x.priorPlan
	}
	for i, s := range steps {
		x.add(item{section: secPlan, seq: i, prio: prioPlan, text: s})
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
		it := item{section: secErrors, seq: c.seq, text: text, base: 2}
		if c.resolved {
			it.text += " (resolved: the same call succeeded later)"
			it.base = 0.3
		}
		x.add(it)
		if !c.resolved {
			latest = &x.items[len(x.items)-1]
		}
	}
	if latest != nil {
		latest.prio = prioLastError
	}
}

// Ledger names: at most this many per action of a file, or, in the long form of its line,
// ledgerNamesLong.
const (
	ledgerNames     = 6
	ledgerNamesLong = 24
)

// buildFiles writes the ledger: each file with what was done to it and the names the agent
// wrote into it (edits) or used from it (reads), and one line for the files only named.
func (x *extractor) buildFiles() {
	wrote := map[string][]string{} // path → names the agent wrote into it
	saw := map[string][]string{}   // path → names of what it read that the agent used
	for _, c := range x.calls {
		for _, e := range c.edits {
			wrote[e.path] = append(wrote[e.path], namesOf(e.text)...)
		}
		if c.reads && c.status == callOK {
			for _, a := range c.acts {
				if a.action == actRead {
					for _, n := range namesOf(c.output) {
						if st := x.names.stats[n]; st != nil && st.agent > 0 {
							saw[a.path] = append(saw[a.path], n)
						}
					}
				}
			}
		}
	}
	files := make([]*ledgerFile, 0, len(x.files.files))
	for _, f := range x.files.files {
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].seq < files[j].seq })
	var named []string
	for _, f := range files {
		if len(f.acts) == 0 && f.prior == "" {
			named = append(named, f.path)
			continue
		}
		base := 1.5
		if f.changed() {
			base = 4
		}
		short := f.line(x.topNames(wrote[f.path], f.path, ledgerNames), x.topNames(saw[f.path], f.path, ledgerNames))
		long := f.line(x.topNames(wrote[f.path], f.path, ledgerNamesLong), x.topNames(saw[f.path], f.path, ledgerNamesLong))
		if long == short {
			x.add(item{section: secFiles, seq: f.seq, text: short, base: base, prio: prioFiles})
		} else {
			x.alternatives(item{section: secFiles, seq: f.seq, text: short, base: base, prio: prioFiles},
				item{section: secFiles, seq: f.seq, text: long, base: base})
		}
	}
	if len(named) > 0 {
		x.add(item{section: secFiles, seq: x.seq, text: "- named, not opened: " + strings.Join(named, ", "), base: 0.3, prio: prioFiles})
	}
}

// topNames returns up to n distinct names of names, the highest weighted first, without the
// file's own path and its parts.
func (x *extractor) topNames(names []string, path string, n int) []string {
	seen := map[string]bool{}
	var out []string
	for _, name := range names {
		if seen[name] || strings.Contains(path, name) {
			continue
		}
		seen[name] = true
		out = append(out, name)
	}
	sort.SliceStable(out, func(i, j int) bool { return x.names.weight(out[i]) > x.names.weight(out[j]) })
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// buildCalls writes each call not shown as the last action with its outcome and what its
// output said.
func (x *extractor) buildCalls() {
	for _, c := range x.calls {
		if c.shown || c.status == callPending || c.status == callUnanswered {
			continue
		}
		var alts []item
		for _, line := range x.callLines(c, excerptBytes, excerptBytesLong, excerptBytesFull) {
			text := "- " + line
			if len(alts) == 0 || alts[len(alts)-1].text != text {
				alts = append(alts, item{section: secCalls, seq: c.seq, text: text, base: 0.5})
			}
		}
		x.alternatives(alts...)
	}
}

// callLines renders a call with its outcome once for each excerpt limit, in the order of
// limits: "label → ok: excerpt", "label → failed: line". The output is ranked once, whatever
// the number of limits; only the fill depends on the limit, so each line is what excerpting
// the output within that limit alone gives. Each call is rendered by one callLines.
func (x *extractor) callLines(c *call, limits ...int) []string {
	lines := make([]string, len(limits))
	switch c.status {
	case callFailed:
		for i := range lines {
			lines[i] = c.label + " → failed: " + cmp.Or(c.detail, "(no output)")
		}
	case callPending:
		for i := range lines {
			lines[i] = c.label
		}
	default:
		r := x.rank(c.output)
		for i, limit := range limits {
			if ex := r.fill(limit); ex != "" {
				lines[i] = c.label + " → " + ex
			} else {
				lines[i] = c.label + " → ok"
			}
		}
	}
	return lines
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

// rank splits output into parts and orders them by worth: the weights of the names they
// hold, 10 for each of the instructions' terms they hold, and a little for coming first
// (the first lines say what the output is); ties keep the output's order. Nothing of it
// depends on an excerpt's length. An empty output has no parts.
func (x *extractor) rank(output string) ranked {
	output = strings.TrimSpace(output)
	if output == "" {
		return ranked{}
	}
	if fields := jsonFields(output); fields != nil {
		return x.rankParts(fields, ", ")
	}
	var lines []string
	for _, l := range strings.Split(output, "\n") {
		if l = oneLine(l); l != "" && !strings.HasPrefix(l, "<") && !agentPrompt(l) {
			lines = append(lines, l)
		}
	}
	return x.rankParts(lines, " / ")
}

// agentPrompt reports whether an output line is an agent harness's prompt state rather than
// output (SWE-agent's "(Open file: …)", "(Current directory: …)", "bash-$").
func agentPrompt(l string) bool {
	return strings.HasPrefix(l, "(Open file:") || strings.HasPrefix(l, "(Current directory:") || l == "bash-$"
}

// rankParts scores parts (see rank), orders them most worth first and cuts each to
// excerptLineBytes; sep is what will join them.
func (x *extractor) rankParts(parts []string, sep string) ranked {
	type scored struct {
		i     int
		score float64
	}
	ss := make([]scored, len(parts))
	for i, p := range parts {
		s := 0.1 / float64(i+1) // the first lines say what the output is
		for _, n := range namesOf(p) {
			s += x.names.weight(n)
		}
		lp := strings.ToLower(p)
		for _, t := range x.terms {
			if strings.Contains(lp, t) {
				s += 10
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

// fill returns the excerpt within limit bytes: it takes the parts most worth first, skipping
// those that would go past limit (the first one is always taken) and stopping once limit is
// reached, and joins them in the output's order; "" when there are no parts.
func (r ranked) fill(limit int) string {
	var chosen []int // indexes into r.parts
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
	out := make([]string, len(chosen))
	for i, k := range chosen {
		out[i] = r.parts[k]
	}
	return strings.Join(out, r.sep)
}

// jsonFields returns the distinct scalar fields of a JSON object or array as key=value, in
// document order (nested keys by their own name), or nil when s is not JSON.
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
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch t := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(k, t[k])
			}
		case []any:
			for _, e := range t {
				walk(key, e)
			}
		case nil:
		default:
			b, _ := json.Marshal(t)
			field := strings.Trim(string(b), `"`)
			if key != "" {
				field = key + "=" + field
			}
			if !seen[field] {
				seen[field] = true
				out = append(out, field)
			}
		}
	}
	walk("", v)
	return out
}

// buildNotes keeps the agent's statements (the latest too, unless the last intent says all
// of it): their first paragraph, code left out, or, at more cost, most of them with their
// code blocks cut short.
func (x *extractor) buildNotes() {
	for k, s := range x.statements {
		if k == len(x.statements)-1 && strings.TrimSpace(s.text) == lastParagraph(s.text, intentBytes) {
			break // all of it is the last intent
		}
		short := firstParagraph(withoutFences(s.text), noteBytes)
		long := oneLine(clip.Prefix(shortenFences(s.text), noteBytesLong))
		if short == "" {
			short = long
		}
		if short == "" {
			continue
		}
		x.alternatives(item{section: secNotes, seq: s.seq, text: "- " + oneLine(short), base: 0.3},
			item{section: secNotes, seq: s.seq, text: "- " + long, base: 0.3})
	}
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

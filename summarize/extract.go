package summarize

import (
	"cmp"
	"slices"
	"strconv"
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
// extractive summary) is merged section by section; any other anchor is kept whole, as far
// as the budget allows, under secEarlier.
const (
	secEarlier  = "Earlier summary"
	secRequests = "User requests (verbatim)"
	secStopped  = "Where it stopped"
	secPlan     = "Plan (latest state)"
	secErrors   = "Errors"
	secFiles    = "Files (what was done to each)"
	secCalls    = "Commands and results"
	secNotes    = "Agent notes"
)

var sections = []string{secEarlier, secRequests, secStopped, secPlan, secErrors, secFiles, secCalls, secNotes}

// Caps on single items, in bytes, before the token budget is applied.
const (
	requestBytes     = 2400
	intentBytes      = 400
	noteBytes        = 300
	noteBytesLong    = 1500
	codeBytes        = 500
	excerptBytes     = 160
	excerptBytesLong = 700
	// excerptBytesLastRead bounds the last action's excerpt when it read or searched.
	excerptBytesLastRead = 350
	excerptBytesFull     = 1800
	excerptLineBytes     = 120
	wroteBytes           = 900
)

// ExtractiveSummary returns a deterministic summary of in.Messages built from the
// conversation itself, without a model, for the turn that continues from it:
//
//   - the user's requests verbatim, except those in in.Kept (they stay in the conversation
//     beside the summary: never twice);
//   - where the range stopped: the agent's last intent, its last action and its outcome,
//     the calls still waiting for a result;
//   - the latest plan or todo list the agent wrote (TodoWrite, update_plan), in full;
//   - errors, from the structured outcome of each call (an error result, a return code, the
//     end of a run's output; never words inside a file it read), each marked resolved when
//     the same call later succeeded;
//   - a ledger of the files and what was done to each, with the names the agent wrote into
//     them or used from them;
//   - the commands and calls with their outcomes and the lines of their output that hold the
//     names the agent went on to use;
//   - the agent's earlier notes.
//
// The requests, where it stopped, the plan and the latest error are kept first; the rest is
// chosen within opt.MaxTokens by the names it carries, ranked by use (names the agent wrote,
// values it took from an output and used, recent ones), each line stating what was done
// with them. A previous summary (in.Anchor) is folded in: an extractive one section by
// section, any other one as an "Earlier summary" section. Few-shot demonstrations are left
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
	x := newExtractor(in.Kept, instructionTerms(ins))
	x.anchor(in.Anchor)
	msgs, pos := in.Numbered()
	x.walk(msgs, pos, in.Anchor != "" || in.TaskInHead)
	x.build()
	if ins == "" {
		return x.render(opt)
	}
	head := "Instructions for this summary:\n" + quote(ins)
	for n := len(head); opt.Count(head) > int(opt.MaxTokens)/4 && n > 16; {
		n = n * 3 / 4
		head = "Instructions for this summary:\n" + quote(engine.Truncate(ins, n))
	}
	if opt.Count(head) > int(opt.MaxTokens)/4 {
		return x.render(opt)
	}
	opt.MaxTokens -= int64(opt.Count(head) + 1)
	return head + "\n\n" + x.render(opt)
}

// textAt is a text of the range and when it came.
type textAt struct {
	text string
	seq  int
	// commands are the shell commands the text issued (the text protocol): blocks of it the
	// summary states as calls.
	commands []string
}

// extractor gathers a range as ExtractiveSummary walks it, then builds the summary's items.
type extractor struct {
	kept  map[*compactorv1.Message]bool // requests that stay beside the summary
	terms []string                      // the words of the caller's instructions
	seq   int                           // the position of the latest event
	pos   int                           // the citation index of the message being read
	posAt []int                         // posAt[seq] is the citation index of event seq's message
	use   usage
	files ledger

	requests    []textAt
	statements  []textAt
	calls       []*call
	open        map[string]*call // structured calls without a result yet, by id
	shells      []*call          // the text-protocol commands of the latest assistant text
	refusals    []textAt         // the harness's refusals of the agent's messages (engine.IsRefusal)
	priorErrors []priorError     // an anchor's failed calls not fixed then (anchorError)
	// priorRefusals is how many refusals an anchor counted, where it cited them, and the
	// latest refusal's words it quoted.
	priorRefusals      int
	priorRefusalCites  []engine.Citation
	priorRefusalLatest string
	openFile           string             // the file an "open" tool opened last
	failures           map[string][]*call // failed calls not yet followed by a success of the same call
	todo               []string           // the latest plan or todo list, one line per step
	todoSeq            int                // the call that wrote it
	priorPlan          []string           // the plan of an anchor
	priorStopped       []string           // where an anchor's range stopped, one line per item
	anchorEnd          int                // the events 1..anchorEnd are an anchor's lines (read before the walk)
	demos              int                // few-shot demonstrations left out

	legend bool   // render writes the legend of citations
	prior  []item // items of an anchor
	items  []item
	groups int // the last group of alternatives
}

func newExtractor(kept []*compactorv1.Message, terms []string) *extractor {
	x := &extractor{terms: terms, open: map[string]*call{}, failures: map[string][]*call{}, posAt: []int{0}}
	if len(kept) > 0 {
		x.kept = make(map[*compactorv1.Message]bool, len(kept))
		for _, m := range kept {
			x.kept[m] = true
		}
	}
	return x
}

// next advances the position and returns it.
func (x *extractor) next() int {
	x.seq++
	x.posAt = append(x.posAt, x.pos)
	return x.seq
}

// walk reads the messages in order, pos[i] the index msgs[i] is cited by; taskBefore says
// the conversation's task comes before the range (an earlier summary, the head).
func (x *extractor) walk(msgs []*compactorv1.Message, pos []int, taskBefore bool) {
	kinds := engine.ClassifyUsers(msgs, taskBefore)
	for i, m := range msgs {
		if engine.InHead(m) {
			continue // kept beside the summary, never in it
		}
		x.pos = pos[i]
		switch m.GetKind() {
		case compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT, compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY:
			continue
		}
		text := messageText(m)
		switch m.GetRole() {
		case compactorv1.Role_ROLE_USER:
			x.hostSummaries(m)
			switch kinds[i] {
			case engine.UserRequest:
				text = engine.UserWords(m) // host blocks: kept in the head or transient
				seq := x.next()
				x.use.note(text, seq, fromUser)
				if !x.kept[m] {
					x.requests = append(x.requests, textAt{text: text, seq: seq})
					x.mentions(text)
				}
			case engine.UserObservation:
				if x.kept[m] {
					// A request the compaction keeps beside the summary, whatever it reads as
					// here (a SWE-agent issue ends with the prompt line its outputs end with).
					x.use.note(text, x.next(), fromUser)
					break
				}
				x.observation(text)
			case engine.UserOther:
				x.use.note(text, x.next(), fromUser)
			case engine.UserDemonstration:
				x.demos++
			}
		case compactorv1.Role_ROLE_ASSISTANT:
			if earlier, ok := engine.ReplacedCompaction(text); ok && readAnchor(earlier) != nil {
				// A provider's compaction in sections: an earlier summary, carried section by
				// section (plain text stays the agent's statement, its names weighed as such).
				x.anchor(earlier)
				text = ""
			}
			if text != "" {
				seq := x.next()
				x.use.note(withoutFences(text), seq, fromAgentText)
				x.mentions(text)
				observed := i+1 < len(msgs) && kinds[i+1] == engine.UserObservation
				x.unanswered(nil) // the agent went on without their output
				x.shells = x.shells[:0]
				cmds := commandBlocks(text, observed)
				for _, cmd := range cmds {
					c := x.shellCall(cmd)
					x.calls = append(x.calls, c)
					x.shells = append(x.shells, c)
				}
				x.statements = append(x.statements, textAt{text: unlabeled(text), seq: seq, commands: cmds})
			}
		}
		for _, p := range m.GetParts() {
			switch {
			case p.GetToolCall() != nil:
				c := x.toolCall(p.GetToolCall())
				x.calls = append(x.calls, c)
				x.open[p.GetToolCall().GetToolCallId()] = c
			case p.GetToolResult() != nil:
				x.result(p.GetToolResult())
			}
		}
	}
	// What the range does not answer stays pending; its file actions are recorded as tried.
	for _, c := range x.calls {
		if c.status == callPending {
			x.settleActs(c.acts, false)
		}
	}
}

// hostSummaries folds in the summaries a host wrote into the user message m after
// compacting on its own (engine.ContinuedSummary), as an earlier summary of this range.
func (x *extractor) hostSummaries(m *compactorv1.Message) {
	for _, p := range m.GetParts() {
		if s, ok := engine.ContinuedSummary(p.GetText().GetText()); ok {
			x.anchor(s)
		}
	}
}

// mentions records the paths and file names a text names in the ledger. A glob pattern
// (`*_test.py`, src/**/conf.py) names no one file: the words of a field with a '*' are
// not recorded (eachWord would read `*_test.py` as the file _test.py).
func (x *extractor) mentions(text string) {
	for field := range strings.FieldsSeq(text) {
		if strings.IndexByte(field, '*') >= 0 {
			if field = withoutBold(field); strings.IndexByte(field, '*') >= 0 {
				continue
			}
		}
		eachWord(field, func(w string) {
			if engine.IsPathLike(w) {
				x.file(w, actMention)
			}
		})
	}
}

// withoutBold returns a whitespace field without the markdown bold it opens or closes
// ("**src/x.py**,", "**`a.py`**:", the "**" of "**the file src/x.py**"), which is no
// glob's: a glob's "**" stands beside a slash (src/**/conf.py, **/x.py, src/**).
func withoutBold(field string) string {
	if rest, ok := strings.CutPrefix(field, "**"); ok && !strings.HasPrefix(rest, "/") {
		field = rest
	}
	body := strings.TrimRight(field, ".,:;)")
	if rest, ok := strings.CutSuffix(body, "**"); ok && !strings.HasSuffix(rest, "/") {
		field = rest + field[len(body):]
	}
	return field
}

// result settles the call a tool result answers.
func (x *extractor) result(tr *compactorv1.ToolResultPart) {
	id := tr.GetToolCallId()
	c := x.open[id]
	delete(x.open, id)
	if c == nil {
		name := cmp.Or(tr.GetToolName(), "tool")
		c = &call{seq: x.next(), tool: name, label: name + "(…)", key: name + "(" + id + ")", short: name}
		x.calls = append(x.calls, c)
	}
	kind, body := engine.ToolOutputText(tr.GetOutput())
	switch kind {
	case "error", "denied":
		x.settle(c, body, true, true, kind+": "+firstLine(body))
	default:
		if rc, ok := returnCode(body); ok {
			x.settle(c, body, rc != 0, true, exitDetail(rc, body))
		} else {
			x.settle(c, body, false, false, "")
		}
	}
}

// errorReply reports whether the first line of a tool's reply says the tool refused the call
// ("Error: payment amount does not add up"): a tool that answers in text reports failure so.
func errorReply(first string) bool {
	return len(first) > len("error:") && strings.EqualFold(first[:len("error:")], "error:")
}

// observation settles the latest text-protocol command with the output an agent sent back
// as a user message.
func (x *extractor) observation(text string) {
	if engine.IsRefusal(text) {
		x.refused(text)
		return
	}
	var c *call
	if n := len(x.shells); n > 0 {
		c = x.shells[n-1]
	}
	x.unanswered(c)
	if c == nil || c.status != callPending {
		c = &call{seq: x.next(), tool: "shell", label: "(output)", key: "output", short: "output", reads: true}
		if len(x.calls) == 0 {
			if label, ok := x.answersPrior(); ok {
				c.label, c.key = label, "shell("+label+")"
			}
		}
		x.calls = append(x.calls, c)
	}
	if rc, ok := returnCode(text); ok {
		x.settle(c, text, rc != 0, true, exitDetail(rc, text))
	} else {
		x.settle(c, text, false, false, "")
	}
}

// refused records a harness's refusal of the latest assistant text: none of its commands
// ran, so none changed a file; the last of them carries the refusal as its outcome.
func (x *extractor) refused(text string) {
	seq := x.next()
	x.refusals = append(x.refusals, textAt{text: text, seq: seq})
	detail := oneLine(engine.Truncate(firstLine(text), errorLineBytes))
	if len(x.calls) == 0 {
		// The range opens with the refusal of the command an earlier summary said was
		// waiting for its result: that command is the one refused.
		if label, ok := x.answersPrior(); ok {
			x.calls = append(x.calls, &call{seq: seq, outSeq: seq, tool: "shell", label: label, key: "shell(" + label + ")",
				short: label, status: callRefused, output: text, detail: detail})
		}
		return
	}
	for i, c := range x.shells {
		if c.status != callPending {
			continue
		}
		c.status = callRefused
		if i == len(x.shells)-1 {
			c.output, c.outSeq, c.detail = text, seq, detail
		}
	}
}

// unanswered marks the latest assistant text's commands still pending, but settled, as
// unanswered: they got no output of their own. The harnesses known here run one command per
// message: an observation answers the last of them, and a command the agent wrote before its
// next text got no output (a refusal answers none of them: refused). Nothing the agent wrote
// earlier is still waiting for a result.
func (x *extractor) unanswered(settled *call) {
	for _, c := range x.shells {
		if c != settled && c.status == callPending {
			c.status = callUnanswered
		}
	}
}

// unlabeled returns an agent's text without the harness's label opening it
// (engine.Unlabeled).
func unlabeled(text string) string {
	t, _ := engine.Unlabeled(text)
	return t
}

// waitingPrefix opens the line of where a range stopped that names a call still waiting
// for its result (buildStopped).
const waitingPrefix = "waiting for the result of: "

// lastIntentPrefix and lastActionPrefix open the lines of where a range stopped that say the
// agent's last intent and its last action; the next summary reads them back
// (buildPriorStopped).
const (
	lastIntentPrefix = "last intent: "
	lastActionPrefix = "last action: "
)

// answersPrior returns the call an earlier summary said was waiting for its result, with
// that summary's citation of it, when the range opens with its output: the one call it
// named, which the range now answers (its line of where it stopped is then said by the
// output's own). ok is false when the earlier summary named no such call, or several.
func (x *extractor) answersPrior() (label string, ok bool) {
	k := -1
	for i, l := range x.priorStopped {
		if strings.HasPrefix(unbullet(l), waitingPrefix) {
			if k >= 0 {
				return "", false
			}
			k = i
		}
	}
	if k < 0 {
		return "", false
	}
	label = strings.TrimPrefix(unbullet(x.priorStopped[k]), waitingPrefix)
	x.priorStopped = slices.Delete(x.priorStopped, k, k+1)
	return oneLine(engine.Truncate(oneLine(label), callCommandBytes)), true
}

// exitDetail says how a run with a non-zero return code failed: its failure line, else the
// code.
func exitDetail(rc int, output string) string {
	if rc == 0 {
		return ""
	}
	if l := failureLine(output); l != "" {
		return l
	}
	return "exit " + strconv.Itoa(rc)
}

// commandBlocks returns the commands of an assistant text: its shell fenced blocks, and,
// when an observation answers it, the last fenced block without a language (SWE-agent's
// commands).
func commandBlocks(text string, observed bool) []string {
	cmds := shellBlocks(text)
	if len(cmds) > 0 || !observed {
		return cmds
	}
	last := ""
	engine.EachFence(text, func(lang, body string) {
		if c := strings.TrimSpace(body); lang == "" && c != "" {
			last = c
		}
	})
	if last == "" {
		return nil
	}
	return []string{last}
}

// messageText is the text parts of m, trimmed and joined by newlines.
func messageText(m *compactorv1.Message) string {
	var parts []string
	for _, p := range m.GetParts() {
		if t := p.GetText(); t != nil && strings.TrimSpace(t.GetText()) != "" {
			parts = append(parts, strings.TrimSpace(t.GetText()))
		}
	}
	return strings.Join(parts, "\n")
}

// quote renders text as a list item whose continuation lines are indented.
func quote(text string) string {
	return "- " + strings.ReplaceAll(strings.TrimSpace(text), "\n", "\n  ")
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

package engine

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// PromptVersion identifies the summary prompt and the extractive summary format. It is part
// of every summary cache key: any change to the wording of SummarySystemPrompt, SummaryPrompt,
// Transcript or summarize.ExtractiveSummary must bump it so stale summaries are not reused.
//
// v2: the extractive summary quotes the instructions and leaves demonstrations out, and every
// summary is checked (package fidelity) before it is cached.
// v3: requests kept verbatim beside the summary are not repeated in it; the summary is built
// for the next turn (outcomes from structure, a ledger with what was done to each file and
// the names involved, the latest plan, values the agent carried from outputs).
// v4: every line cites the messages it came from (cite.go); the transcript numbers them; the
// extractive summary states what was done with names rather than listing them.
const PromptVersion = "v4"

// SummaryInput is what one summarization covers.
type SummaryInput struct {
	// Messages are the messages to summarize, oldest first: the active messages before the
	// cut. The previous summary is passed as Anchor, not as a message. Head messages (InHead:
	// system, session preface, pinned) stay verbatim in the conversation and are skipped, as
	// are COMPACT_PROMPT and COMPACT_SUMMARY messages.
	Messages []*compactorv1.Message
	// Anchor is the text of the previous summary (see SummaryText), folded into the new one;
	// empty when there is none.
	Anchor string
	// Instructions are the caller's extra focus for the summary (CompactRequest.instructions).
	Instructions string
	// Kept are messages of Messages that stay verbatim in the conversation right after the
	// summary (the user requests a compaction keeps, DISPOSITION_KEEP_REQUEST): context the
	// summary must not repeat.
	Kept []*compactorv1.Message
	// Positions, when it has one per message, is each message's index in the conversation
	// Compact received (the source its summary cites, see Cite); nil numbers Messages from 0.
	Positions []int
	// TaskInHead says the conversation's task is not among Messages: the head keeps it
	// (HeadTask), so the first user message of Messages is a request only if it reads as one.
	TaskInHead bool
}

// Numbered returns in.Messages without head messages (InHead), which are never summarized:
// what a summarizer is given; and the position each is cited by (see Positions).
func (in SummaryInput) Numbered() ([]*compactorv1.Message, []int) {
	msgs := make([]*compactorv1.Message, 0, len(in.Messages))
	pos := make([]int, 0, len(in.Messages))
	for i, m := range in.Messages {
		if InHead(m) {
			continue
		}
		p := i
		if len(in.Positions) == len(in.Messages) {
			p = in.Positions[i]
		}
		msgs, pos = append(msgs, m), append(pos, p)
	}
	return msgs, pos
}

// summarySystemPrompt is the text SummarySystemPrompt returns; a change to its wording bumps
// PromptVersion.
const summarySystemPrompt = `You write the summary that replaces the earlier part of a conversation between a user and an AI assistant (often a coding or tool-using agent) when that conversation no longer fits the assistant's context window. After compaction the assistant sees only your summary and the most recent messages, so anything you leave out is lost.

Rules:
- Be specific and dense. Prefer exact quotes, names, file paths, identifiers, commands, numbers and error messages to paraphrase.
- Quote the user's requests and constraints verbatim.
- Never invent anything that is not in the conversation or the previous summary.
- Do not answer the user, do not continue the work and do not call tools: output only the summary, in plain text with the section headings you are given.`

// SummarySystemPrompt returns the system prompt for LLM summarizers.
func SummarySystemPrompt() string { return summarySystemPrompt }

// SummarySections are the headings the summary prompt asks for, in order. They are the parts
// of a conversation that matter most to continue it after compaction.
var SummarySections = []struct{ Heading, Ask string }{
	{"User requests and constraints", "Every request, question, preference and constraint the user expressed, each quoted verbatim (shorten only very long pasted content, marking the cut with …), except the messages marked as kept verbatim after the summary: do not repeat those. Keep the order; mark requests that were later changed or withdrawn."},
	{"Key decisions", "Decisions taken and why, including approaches that were rejected."},
	{"Files and identifiers", "Each file the agent read, searched, created, edited, ran or deleted, with what was done to it and the functions, types, variables and other names it wrote there or used from it, verbatim, grouped by file: a statement per file, never a bare list of names. Include files the agent created (its scripts) by name."},
	{"Values", "Values the agent took from tool outputs and used or will need (ids, numbers, dates, amounts, line numbers), verbatim, each with where it came from."},
	{"Errors and fixes", "Errors met, judged from each call's outcome (an error result, a non-zero exit status, a failing run) and never from words inside a file the agent read; quote the key line of each, and say how it was fixed or that it is still open."},
	{"Plan", "The latest plan or todo list the agent kept, in full, with each step's status."},
	{"Pending tasks", "Work the user asked for that is not done yet."},
	{"Current work", "What was being worked on right before this summary, in detail: the file, the change, the state it is in."},
	{"Next step", "The exact next step to take, consistent with the user's most recent request (quote it). If the work is complete and nothing was asked next, say so."},
}

// SummaryPrompt returns the user prompt for LLM summarizers: the previous summary (when
// there is one), the transcript of in.Messages, the sections to write and the caller's
// instructions. opt bounds how much of each tool call and tool output the transcript shows.
func SummaryPrompt(in SummaryInput, opt TranscriptOptions) string {
	return summaryPromptWith(in, NumberedTranscript(in, opt))
}

// NumberedTranscript is the transcript of in's messages, each headed by the position a
// summary cites it by, and the messages in in.Kept headed as kept verbatim after the summary.
func NumberedTranscript(in SummaryInput, opt TranscriptOptions) string {
	msgs, pos := in.Numbered()
	isKept := make(map[*compactorv1.Message]bool, len(in.Kept))
	for _, m := range in.Kept {
		isKept[m] = true
	}
	return transcript(msgs, pos, opt, isKept)
}

func summaryPromptWith(in SummaryInput, transcript string) string {
	var b strings.Builder
	if a := strings.TrimSpace(in.Anchor); a != "" {
		b.WriteString("The conversation was compacted before. This is the summary of everything before the transcript below:\n\n<previous-summary>\n")
		b.WriteString(a)
		b.WriteString("\n</previous-summary>\n\n")
	}
	b.WriteString("<transcript>\n")
	b.WriteString(transcript)
	b.WriteString("</transcript>\n\n")
	if strings.TrimSpace(in.Anchor) != "" {
		b.WriteString("Write one summary that covers both the previous summary and the transcript: keep everything from the previous summary that still matters and update what the transcript changed. Use these sections:\n\n")
	} else {
		b.WriteString("Summarize the transcript in these sections:\n\n")
	}
	for i, s := range SummarySections {
		fmt.Fprintf(&b, "%d. %s: %s\n", i+1, s.Heading, s.Ask)
	}
	b.WriteString(citeAsk)
	if ins := strings.TrimSpace(in.Instructions); ins != "" {
		b.WriteString("\nAdditional instructions for this summary:\n<instructions>\n")
		b.WriteString(ins)
		b.WriteString("\n</instructions>\n")
	}
	return b.String()
}

// FitSummaryPrompt returns SummaryPrompt(in, …) within maxBytes (0: no bound) for a
// summarizer model with a bounded context: it shrinks the caps on tool outputs, tool inputs
// and texts step by step, and as a last resort cuts the middle of the transcript (keeping the
// oldest requests and the most recent work). The anchor and the instructions are never cut.
func FitSummaryPrompt(in SummaryInput, maxBytes int) string {
	steps := []TranscriptOptions{
		{},
		{MaxToolOutputBytes: 800, MaxToolInputBytes: 400, MaxTextBytes: 8000},
		{MaxToolOutputBytes: 300, MaxToolInputBytes: 200, MaxTextBytes: 3000},
		{MaxToolOutputBytes: 120, MaxToolInputBytes: 120, MaxTextBytes: 1200},
	}
	var p string
	for _, o := range steps {
		p = SummaryPrompt(in, o)
		if maxBytes <= 0 || len(p) <= maxBytes {
			return p
		}
	}
	last := steps[len(steps)-1]
	t := NumberedTranscript(in, last.withDefaults())
	over := len(p) - maxBytes
	if keep := len(t) - over - 64; keep > 0 {
		t = Truncate(t, keep)
	} else {
		t = ""
	}
	return summaryPromptWith(in, t)
}

// Framing of the COMPACT_SUMMARY message text. summaryOpen ends the preamble; summaryClose
// starts the epilogue; SummaryText strips both.
const (
	summaryPreamble = "This session continues from an earlier conversation that was compacted to fit the context window. The summary below covers the earlier part of the conversation (%d messages); the messages after this one continue it verbatim."
	// summaryPreambleKept is the preamble of a summary followed by the requests a compaction
	// kept verbatim: it tells the model, and the next compaction (KeptAfter), that they are
	// the user's earlier requests rather than new ones.
	summaryPreambleKept = "This session continues from an earlier conversation that was compacted to fit the context window. The summary below covers the earlier part of the conversation (%d messages); the %d user messages right after this one are the user's own requests, kept word for word, and the messages after them continue it verbatim."
	keptClause          = " user messages right after this one are the user's own requests"
	summaryOpen         = "\n\n<summary>\n"
	summaryClose        = "\n</summary>\n\n"
	summaryEpilogue     = "Continue from where the conversation left off, without asking the user to repeat anything above."
)

// SummaryMessageText frames a summary as the text of the COMPACT_SUMMARY message, so the
// model knows the session continues from a summary of covered earlier messages, followed by
// kept user messages that are the user's requests (those a compaction kept verbatim beside
// the summary, and those the verbatim tail opens with).
func SummaryMessageText(summary string, covered, kept int) string {
	pre := fmt.Sprintf(summaryPreamble, covered)
	if kept > 0 {
		pre = fmt.Sprintf(summaryPreambleKept, covered, kept)
	}
	return pre + summaryOpen + strings.TrimSpace(summary) + summaryClose + summaryEpilogue
}

// KeptAfter returns how many user messages right after the COMPACT_SUMMARY message m are the
// user's requests a compaction kept verbatim beside it, as its framing says (0 for a summary
// compactord did not frame).
func KeptAfter(m *compactorv1.Message) int {
	if m.GetKind() != compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
		return 0
	}
	t := m.GetParts()
	if len(t) == 0 {
		return 0
	}
	s := t[0].GetText().GetText()
	head, _, ok := strings.Cut(s, summaryOpen)
	if !ok || !strings.HasPrefix(head, "This session continues from an earlier conversation") {
		return 0
	}
	k := strings.Index(head, keptClause)
	if k < 0 {
		return 0
	}
	digits := head[:k]
	digits = digits[strings.LastIndexByte(digits, ' ')+1:]
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// SummaryFrameTokens is the tokens a COMPACT_SUMMARY message covering covered messages costs
// beyond its summary text (its framing, with the kept requests' clause, and the message
// overhead), plus a margin for the tokens that joining text to the framing can add: the
// summary room a plan reserves holds the framing and the text.
// The count is taken with covered (and the kept requests, never more) written as all nines
// of its number of digits (the most tokens those digits take), so that it depends on the
// digits alone.
func SummaryFrameTokens(tc tokenizer.Text, covered int) int64 {
	const joinMargin = 2
	nines := strings.Repeat("9", len(strconv.Itoa(covered)))
	return MessageOverheadTokens + tc.Count(strings.ReplaceAll(summaryPreambleKept, "%d", nines)+summaryOpen) +
		tc.Count(summaryClose+summaryEpilogue) + joinMargin
}

// maxFrameDigits bounds the digits of a message count the frames memo holds.
const maxFrameDigits = 12

// frameMemo memoizes SummaryFrameTokens by tokenizer and the number of digits of the count
// of messages it names (0: not computed yet).
type frameMemo [3][maxFrameDigits + 1]atomic.Int64

// tokens is SummaryFrameTokens(tc, covered) under tokenizer id, memoized: the framing only
// varies with the digits of covered.
func (fm *frameMemo) tokens(id tokenizer.ID, tc tokenizer.Text, covered int) int64 {
	digits := len(strconv.Itoa(covered))
	if int(id) >= len(fm) || digits > maxFrameDigits {
		return SummaryFrameTokens(tc, covered)
	}
	slot := &fm[id][digits]
	if n := slot.Load(); n > 0 {
		return n
	}
	n := SummaryFrameTokens(tc, covered)
	slot.Store(n)
	return n
}

// SummaryFrameTokens is SummaryFrameTokens under the named tokenizer ("" for the default),
// memoized by the counter: the framing varies only with the tokenizer and the digits of
// covered. The error is a *ValidationError for an unknown tokenizer name.
func (c *Counter) SummaryFrameTokens(covered int, name string) (int64, error) {
	id, ok := tokenizer.Parse(name)
	if !ok {
		return 0, Invalid("policy.tokenizer", fmt.Sprintf("unknown tokenizer %q", name))
	}
	tc, err := tokenizer.New(id)
	if err != nil {
		return 0, err
	}
	return c.frames.tokens(id, tc, covered), nil
}

// SummaryMessage returns the COMPACT_SUMMARY message (role user) carrying SummaryMessageText.
func SummaryMessage(summary string, covered, kept int) *compactorv1.Message {
	return &compactorv1.Message{
		Role: compactorv1.Role_ROLE_USER,
		Kind: compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY,
		Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{
			Text: &compactorv1.TextPart{Text: SummaryMessageText(summary, covered, kept)},
		}}},
	}
}

// SummaryText returns the summary inside a COMPACT_SUMMARY message: its text parts joined,
// with the framing of SummaryMessageText removed when present (summaries written by other
// tools are returned whole). Use it as SummaryInput.Anchor.
func SummaryText(m *compactorv1.Message) string {
	var parts []string
	for _, p := range m.GetParts() {
		if t := p.GetText(); t != nil {
			parts = append(parts, t.GetText())
		}
	}
	s := strings.Join(parts, "\n")
	if strings.HasPrefix(s, "This session continues from an earlier conversation") {
		if i := strings.Index(s, summaryOpen); i >= 0 {
			rest := s[i+len(summaryOpen):]
			if j := strings.LastIndex(rest, summaryClose); j >= 0 {
				return strings.TrimSpace(rest[:j])
			}
		}
	}
	return strings.TrimSpace(s)
}

// TranscriptOptions bound the transcript. Zero values take the defaults.
type TranscriptOptions struct {
	// MaxToolOutputBytes caps each tool output; longer ones keep their head and tail (errors
	// and results usually sit at the end). Default 2000.
	MaxToolOutputBytes int
	// MaxToolInputBytes caps each tool call's input JSON. Default 1000.
	MaxToolInputBytes int
	// MaxTextBytes caps each text part (long pasted content). Default 20000.
	MaxTextBytes int
}

func (o TranscriptOptions) withDefaults() TranscriptOptions {
	if o.MaxToolOutputBytes <= 0 {
		o.MaxToolOutputBytes = 2000
	}
	if o.MaxToolInputBytes <= 0 {
		o.MaxToolInputBytes = 1000
	}
	if o.MaxTextBytes <= 0 {
		o.MaxTextBytes = 20000
	}
	return o
}

// Transcript renders messages as a plain-text transcript for LLM summarizers: one block per
// message headed by its role, tool calls with their (capped) inputs, tool outputs capped to
// head and tail, images and files as placeholders. Reasoning is left out (it is long, often
// encrypted, and the visible text states its conclusions), as are COMPACT_PROMPT and
// COMPACT_SUMMARY messages.
func Transcript(msgs []*compactorv1.Message, opt TranscriptOptions) string {
	return transcript(msgs, nil, opt, nil)
}

// transcript is Transcript with each message headed by its citation index pos[i] ("[m12
// user]") when pos is not nil, and the messages in kept marked.
func transcript(msgs []*compactorv1.Message, pos []int, opt TranscriptOptions, kept map[*compactorv1.Message]bool) string {
	opt = opt.withDefaults()
	var b strings.Builder
	for i, m := range msgs {
		switch m.GetKind() {
		case compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT, compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY:
			continue
		}
		head := func(kept bool) {
			b.WriteString("[")
			if pos != nil {
				b.WriteString("m")
				b.WriteString(strconv.Itoa(pos[i]))
				b.WriteString(" ")
			}
			b.WriteString(roleName(m.GetRole()))
			if kept {
				b.WriteString(", kept verbatim after the summary: do not repeat")
			}
			b.WriteString("]\n")
		}
		parts := m.GetParts()
		if kept[m] {
			// A kept request keeps the user's words alone (RequestWords): its parts of a host's
			// transient text are the summary's to carry, shown as not kept.
			if w := RequestWords(m); w != m {
				var host []*compactorv1.Part
				for _, p := range parts {
					if hostPart(p) {
						host = append(host, p)
					}
				}
				if len(host) > 0 {
					head(false)
					for _, p := range host {
						sumWritePart(&b, p, opt)
					}
					b.WriteString("\n")
				}
				parts = w.GetParts()
			}
		}
		head(kept[m])
		for _, p := range parts {
			sumWritePart(&b, p, opt)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func sumWritePart(b *strings.Builder, p *compactorv1.Part, opt TranscriptOptions) {
	switch c := p.GetContent().(type) {
	case *compactorv1.Part_Text:
		if t := strings.TrimSpace(c.Text.GetText()); t != "" {
			b.WriteString(Truncate(t, opt.MaxTextBytes))
			b.WriteString("\n")
		}
	case *compactorv1.Part_Image:
		fmt.Fprintf(b, "[image%s]\n", sumPrefixed(" ", c.Image.GetMediaType()))
	case *compactorv1.Part_File:
		sumWriteFile(b, c.File, opt.MaxToolOutputBytes)
	case *compactorv1.Part_Reasoning:
	case *compactorv1.Part_ToolCall:
		tc := c.ToolCall
		fmt.Fprintf(b, "[tool call %s%s] %s\n", tc.GetToolName(), sumPrefixed(" id=", tc.GetToolCallId()),
			Truncate(strings.TrimSpace(tc.GetInputJson()), opt.MaxToolInputBytes))
	case *compactorv1.Part_ToolResult:
		tr := c.ToolResult
		label, body := ToolOutputText(tr.GetOutput())
		fmt.Fprintf(b, "[tool %s %s%s]\n", label, tr.GetToolName(), sumPrefixed(" id=", tr.GetToolCallId()))
		if body = strings.TrimSpace(body); body != "" {
			b.WriteString(Truncate(body, opt.MaxToolOutputBytes))
			b.WriteString("\n")
		}
	case *compactorv1.Part_ApprovalRequest:
		fmt.Fprintf(b, "[approval requested for tool call %s]\n", c.ApprovalRequest.GetToolCallId())
	case *compactorv1.Part_ApprovalResponse:
		r := c.ApprovalResponse
		verdict := "denied"
		if r.GetApproved() {
			verdict = "approved"
		}
		fmt.Fprintf(b, "[approval %s%s]\n", verdict, sumPrefixed(": ", r.GetReason()))
	}
}

func sumWriteFile(b *strings.Builder, f *compactorv1.FilePart, max int) {
	fmt.Fprintf(b, "[file%s%s", sumPrefixed(" ", f.GetFilename()), sumPrefixed(" ", f.GetMediaType()))
	if u := f.GetUrl(); u != "" {
		fmt.Fprintf(b, " %s]\n", Truncate(u, 200))
		return
	}
	d := f.GetData()
	fmt.Fprintf(b, ", %d bytes]\n", len(d))
	if sumTextMedia(f.GetMediaType()) && utf8.Valid(d) {
		b.WriteString(Truncate(strings.TrimSpace(string(d)), max))
		b.WriteString("\n")
	}
}

func sumTextMedia(mt string) bool {
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json") ||
		mt == "application/xml" || strings.HasSuffix(mt, "+xml")
}

func sumPrefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// ToolOutputText returns a label for a tool output ("result", "error" or "denied") and its
// text: text and JSON outputs as they are, content outputs as their text parts with
// placeholders for images and files.
func ToolOutputText(o *compactorv1.ToolOutput) (label, text string) {
	switch v := o.GetValue().(type) {
	case *compactorv1.ToolOutput_Text:
		return "result", v.Text
	case *compactorv1.ToolOutput_Json:
		return "result", v.Json
	case *compactorv1.ToolOutput_ErrorText:
		return "error", v.ErrorText
	case *compactorv1.ToolOutput_ErrorJson:
		return "error", v.ErrorJson
	case *compactorv1.ToolOutput_Denied:
		return "denied", v.Denied
	case *compactorv1.ToolOutput_Content:
		var b strings.Builder
		for _, p := range v.Content.GetParts() {
			switch c := p.GetContent().(type) {
			case *compactorv1.Part_Text:
				b.WriteString(c.Text.GetText())
				b.WriteString("\n")
			case *compactorv1.Part_Image:
				fmt.Fprintf(&b, "[image%s]\n", sumPrefixed(" ", c.Image.GetMediaType()))
			case *compactorv1.Part_File:
				fmt.Fprintf(&b, "[file%s%s]\n", sumPrefixed(" ", c.File.GetFilename()), sumPrefixed(" ", c.File.GetMediaType()))
			}
		}
		return "result", b.String()
	}
	return "result", ""
}

// Truncate returns s when it is at most max bytes; otherwise its head and tail as
// splitKeep keeps them (two thirds of max and one third, at UTF-8 boundaries, at a line end
// when one is near), joined by a marker saying how many bytes were left out. The result may
// exceed max by the marker's length.
func Truncate(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	head, tail := splitKeep(s, max)
	omitted := len(s) - len(head) - len(tail)
	return head + "\n… [" + strconv.Itoa(omitted) + " bytes omitted] …\n" + tail
}

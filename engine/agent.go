package engine

import (
	"encoding/json"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// This file is the one home of the rules that read how agents talk: which user messages are
// the user's requests and which are tool output or worked examples posing as user turns, and
// which words name files. Planning (the requests a compaction keeps, the outputs it may cut),
// the extractive summarizer, the summary check and the fidelity measures all use these, so
// they agree on what a request and a file are.

// observationPrefixes start the tool outputs that text-protocol agents (mini-swe-agent,
// SWE-agent without function calling, ReAct loops) send back as user messages.
var observationPrefixes = []string{"<returncode>", "<output>", "<tool_result", "<function_results>",
	"Observation:", "OBSERVATION:", "[Tool result", "Tool output:", "The last command <command>"}

// refusalPrefixes start a text-protocol harness's refusal of an agent message it could not
// parse (mini-swe-agent's format error, "Please always provide EXACTLY ONE action in triple
// backticks, found 2 actions."): none of that message's commands ran. Compared without case.
var refusalPrefixes = []string{"Please always provide EXACTLY ONE action"}

// IsRefusal reports whether a user text is a text-protocol harness's refusal of the agent's
// previous message (refusalPrefixes): the commands it held did not run. A refusal is an
// observation (the harness's words, not the user's).
func IsRefusal(text string) bool {
	text = strings.TrimSpace(text)
	for _, p := range refusalPrefixes {
		if len(text) >= len(p) && strings.EqualFold(text[:len(p)], p) {
			return true
		}
	}
	return false
}

// SWE-agent's prompt state line, "(Open file: …) (Current directory: …) bash-$", contains
// promptStateDir and ends with promptStateEnd.
const (
	promptStateDir = "(Current directory:"
	promptStateEnd = "bash-$"
)

// observed is the observation rule (a text-protocol agent's tool output starts with a known
// observation prefix or is its harness's refusal, or ends with SWE-agent's prompt state
// line) over a user text given as its first and last nonblank text parts, trimmed (the whole
// trimmed text for both when it is one), and whether any part contains promptStateDir. No
// prefix or marker contains a newline, so the rule reads the parts as it would their join.
func observed(first, last string, dir bool) bool {
	for _, p := range observationPrefixes {
		if strings.HasPrefix(first, p) {
			return true
		}
	}
	if IsRefusal(first) {
		return true
	}
	return dir && strings.HasSuffix(last, promptStateEnd)
}

// demonstrationMarkers mark few-shot demonstrations (SWE-agent's "--- DEMONSTRATION ---"
// blocks and similar): worked examples of another task, not the user's request.
var demonstrationMarkers = []string{"--- DEMONSTRATION ---", "--- END OF DEMONSTRATION ---",
	"Here is a demonstration of how to correctly accomplish this task"}

// IsDemonstration reports whether a user text is (or carries) a few-shot demonstration.
func IsDemonstration(text string) bool {
	for _, m := range demonstrationMarkers {
		if strings.Contains(text, m) {
			return true
		}
	}
	return false
}

// issuesCommand reports whether an assistant message runs a command the next user message
// answers with its output: a fenced block of shell (ShellFence) in a message without tool
// calls (function calling agents answer with tool results, not user text). A block of
// another language (a chat's Python answer) is not a command.
func issuesCommand(m *compactorv1.Message) bool {
	block := false
	for _, p := range m.GetParts() {
		if p.GetToolCall() != nil {
			return false
		}
		if t := p.GetText(); t != nil && !block && strings.Contains(t.GetText(), "```") {
			EachFence(t.GetText(), func(lang, _ string) {
				block = block || lang == "" || ShellFence(lang)
			})
		}
	}
	return block
}

// ShellFence reports whether a fenced block's language (its opening line, trimmed) is a
// shell's: what text-protocol agents (mini-swe-agent's "```bash") run.
func ShellFence(lang string) bool {
	switch lang {
	case "bash", "sh", "shell", "console", "zsh":
		return true
	}
	return false
}

// statementLabels open an agent's text in text-protocol harnesses' formats (mini-swe-agent's
// "THOUGHT:", SWE-agent's "DISCUSSION"): the format's, not what the agent said.
var statementLabels = []string{"THOUGHT:", "DISCUSSION\n", "DISCUSSION:"}

// Unlabeled returns an agent's text without the harness's label opening it (statementLabels),
// trimmed, and whether it had one; without one, the text as it is.
func Unlabeled(text string) (string, bool) {
	t := strings.TrimSpace(text)
	for _, l := range statementLabels {
		if rest, ok := strings.CutPrefix(t, l); ok {
			return strings.TrimSpace(rest), true
		}
	}
	return text, false
}

// EachFence calls f with the language (the opening fence's line, trimmed) and the body of
// each closed ``` fenced block of text, in order. Fences pair in order: a closing fence is
// never read as the opening of the next block. An opening fence's language is one word (or
// none): ``` followed by words on its line is prose quoting a fence, not one.
func EachFence(text string, f func(lang, body string)) {
	for rest := text; ; {
		i := strings.Index(rest, "```")
		if i < 0 {
			return
		}
		rest = rest[i+3:]
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			return
		}
		lang := strings.TrimSpace(rest[:nl])
		if strings.ContainsAny(lang, " \t`") {
			continue // not an opening fence: look on
		}
		body := rest[nl+1:]
		j := strings.Index(body, "```")
		if j < 0 {
			return
		}
		f(lang, body[:j])
		rest = body[j+3:]
	}
}

// Requests returns the indexes of the user's requests among msgs, oldest first: the first
// user message that is not a demonstration nor host blocks alone (the task), every later user
// message of text only that is neither a tool observation (IsObservation, or the answer to a
// text-protocol command), a demonstration nor host blocks alone (UserContext), and the user
// messages a summary says its compaction kept verbatim as requests (KeptAfter). Compaction
// prompts and summaries, user messages without text and head messages are never requests,
// but for a message of standing instructions that holds the user's words too (a harness's
// task beside its instructions), which the head keeps.
func Requests(msgs []*compactorv1.Message) []int {
	var out []int
	eachUserText(msgs, 0, true, func(i int, k UserKind) {
		if k == UserRequest {
			out = append(out, i)
		}
	})
	return out
}

// UserKind is what a user message with text is, in the conversation it belongs to.
type UserKind uint8

// The kinds of user messages.
const (
	// UserRequest is the user's own request (see Requests).
	UserRequest UserKind = iota + 1
	// UserObservation is a tool's output posing as a user turn: a text-protocol agent's
	// observation (IsObservation, or the answer to a command the assistant wrote in a fenced
	// block), text only.
	UserObservation
	// UserDemonstration carries a few-shot demonstration (IsDemonstration).
	UserDemonstration
	// UserOther is any other user message with text: text beside tool results, images or
	// files.
	UserOther
	// UserContext is a text-only user message of transient host blocks and nothing of the
	// user's (a todo reminder, a hook's output, a slash command's bookkeeping: see the host
	// block rules): neither a request nor an observation; it may be summarized away.
	UserContext
)

// ClassifyUsers returns the kind of each message of msgs: 0 for messages that are not user
// messages with text (and for head messages, compaction prompts and summaries). taskBefore
// says the conversation's task comes before msgs (an earlier summary carries it, or the head
// keeps it: HeadTask): the first user message of msgs is then a request only if it reads as
// one (the task rule applies to a conversation from its start).
func ClassifyUsers(msgs []*compactorv1.Message, taskBefore bool) []UserKind {
	out := make([]UserKind, len(msgs))
	eachUserText(msgs, 0, !taskBefore, func(i int, k UserKind) { out[i] = k })
	return out
}

// HeadTask reports whether a head message of msgs (InHead) holds the task: standing
// instructions with the user's words beside them (a harness's task), which the head keeps
// verbatim. A summarized range after such a head has no task of its own: its first user
// message is a request only if it reads as one (ClassifyUsers's taskBefore).
func HeadTask(msgs []*compactorv1.Message) bool {
	for _, m := range msgs {
		if m.GetRole() != compactorv1.Role_ROLE_USER || !InHead(m) {
			continue
		}
		if fl := messageFlags(m); fl&flagStandingOnly != 0 && fl&flagNoWords == 0 {
			return true
		}
	}
	return false
}

// eachUserText calls f with the index and kind of each user message with text of
// msgs[from:], oldest first (see Requests); without taskRule, the first user message is a
// request only if a later one would be (the conversation was compacted before from).
func eachUserText(msgs []*compactorv1.Message, from int, taskRule bool, f func(i int, k UserKind)) {
	eachUserKind(msgs, from, taskRule, func(i int) textFlags { return messageFlags(msgs[i]) }, f)
}

// eachUserKind is eachUserText reading each message's text through flags (see
// messageFlags), which a measurement memoizes.
func eachUserKind(msgs []*compactorv1.Message, from int, taskRule bool, flags func(i int) textFlags, f func(i int, k UserKind)) {
	task := !taskRule
	command := false // the previous message was an assistant's text-protocol command
	// protocol is whether the conversation speaks a text protocol: some user message reads as
	// a tool's output by its own text (an observation prefix, SWE-agent's prompt line, a
	// refusal) or some assistant message opens with a harness's label (mini-swe-agent's
	// "THOUGHT:"). Only then is a reply to a shell block the command's output; in a chat it is
	// the user's (0: not read yet).
	protocol := 0
	textProtocol := func() bool {
		if protocol == 0 {
			protocol = -1
			for j, m := range msgs {
				if r := m.GetRole(); r == compactorv1.Role_ROLE_USER && flags(j)&flagObservation != 0 ||
					r == compactorv1.Role_ROLE_ASSISTANT && flags(j)&flagLabelled != 0 {
					protocol = 1
					break
				}
			}
		}
		return protocol > 0
	}
	// The user messages a summary right before from says are the requests its compaction
	// kept verbatim are requests, whatever they read as (a SWE-agent task ends with the
	// prompt line its observations end with).
	kept := 0
	if from > 0 {
		kept = KeptAfter(msgs[from-1])
	}
	for i := from; i < len(msgs); i++ {
		m := msgs[i]
		afterCommand := command
		switch m.GetRole() {
		case compactorv1.Role_ROLE_ASSISTANT:
			command = flags(i)&flagCommand != 0
			kept = 0 // the kept requests come before the tail
			continue
		case compactorv1.Role_ROLE_USER:
			command = false
		default:
			command = false
			continue
		}
		if m.GetKind() == compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
			kept = KeptAfter(m)
			continue
		}
		if m.GetKind() != compactorv1.MessageKind_MESSAGE_KIND_UNSPECIFIED {
			continue
		}
		fl := flags(i)
		if kept > 0 && fl&flagEmpty == 0 && !InHead(m) {
			kept--
			task = true
			f(i, UserRequest)
			continue
		}
		if fl&flagStandingOnly != 0 {
			// Standing instructions alone are head (InHead); with the user's words among them
			// (a harness's task beside its instructions) they are a request the head keeps.
			if fl&flagNoWords == 0 {
				task = true
				f(i, UserRequest)
			}
			continue
		}
		if InHead(m) {
			continue
		}
		switch {
		case fl&flagEmpty != 0:
		case fl&flagDemo != 0:
			f(i, UserDemonstration)
		case fl&flagTextOnly != 0 && fl&flagNoWords != 0:
			f(i, UserContext)
		case !task:
			task = true
			f(i, UserRequest)
		case fl&flagTextOnly == 0:
			f(i, UserOther)
		case fl&flagObservation != 0 || afterCommand && textProtocol():
			f(i, UserObservation)
		default:
			f(i, UserRequest)
		}
	}
}

// textFlags are what the rules of agent talk read of one message's text: set once per
// message content (messageFlags), so that classifying a conversation does not read its text
// again.
type textFlags uint16

const (
	flagKnown        textFlags = 1 << iota // the flags below were read
	flagTextOnly                           // a user message of text only
	flagEmpty                              // a user message without text
	flagObservation                        // a user message whose text reads as a tool's output (IsObservation)
	flagDemo                               // a user message carrying a few-shot demonstration
	flagCommand                            // an assistant message issuing a text-protocol command (issuesCommand)
	flagStanding                           // a user message with a part holding standing instructions (StandingPart)
	flagStandingOnly                       // a user message whose every part holds standing instructions
	flagNoWords                            // a user message with text, all of it host blocks: no words of the user's
	flagLabelled                           // an assistant message opening with a text-protocol harness's label (Unlabeled)
	flagHostParts                          // a user message with words of the user's and text parts of transient host text alone (hostPart)
)

// messageFlags reads the text flags of m.
func messageFlags(m *compactorv1.Message) textFlags {
	fl := flagKnown
	switch m.GetRole() {
	case compactorv1.Role_ROLE_ASSISTANT:
		if issuesCommand(m) {
			fl |= flagCommand
		}
		for _, p := range m.GetParts() {
			if t := p.GetText(); t != nil {
				if _, ok := Unlabeled(t.GetText()); ok {
					fl |= flagLabelled
				}
				break
			}
		}
	case compactorv1.Role_ROLE_USER:
		fl |= readUserMessage(m)
	}
	return fl
}

// readUserMessage reads a user message as eachRequest needs it, without joining its text
// parts: flagTextOnly (no tool results, images or files), flagEmpty (no text),
// flagObservation (IsObservation of its joined text), flagDemo (carries a demonstration), and,
// unless it is an observation, the host blocks it holds (flagStanding, flagStandingOnly,
// flagNoWords; see hostBlocks).
func readUserMessage(m *compactorv1.Message) textFlags {
	textOnly, empty, demo, dir := true, true, false, false
	first, last := "", ""
	for _, p := range m.GetParts() {
		t := p.GetText()
		if t == nil {
			textOnly = false
			continue
		}
		s := strings.TrimSpace(t.GetText())
		if s == "" {
			continue
		}
		if empty {
			first = s
		}
		empty, last = false, s
		demo = demo || IsDemonstration(s)
		dir = dir || strings.Contains(s, promptStateDir)
	}
	var fl textFlags
	if textOnly {
		fl |= flagTextOnly
	}
	if empty {
		fl |= flagEmpty
	}
	if demo {
		fl |= flagDemo
	}
	if observed(first, last, dir) {
		return fl | flagObservation // tool output: never host blocks
	}
	if !empty {
		fl |= hostFlags(m)
	}
	return fl
}

// Host blocks. Hosts put context of their own into user messages beside the user's words:
// Claude Code a <system-reminder> holding the CLAUDE.md files ("# claudeMd"), and others with
// the todo state, the file open in the IDE or a hook's output; a slash command's bookkeeping
// (<command-name>, <local-command-stdout>); Codex the AGENTS.md files ("# AGENTS.md
// instructions for <dir>" and an <INSTRUCTIONS> block, or <user_instructions>) and an
// <environment_context>; Cline an <environment_details>. A host block is an XML-style element
// <tag …>…</tag> standing alone in a text part or at its start or end (or Codex's AGENTS.md
// heading), whose tag or content one of the rules below names: an element no rule names (a
// harness's <pr_description>, say) is the user's words.
//
// Standing instructions are the blocks that hold the user's or the project's instructions
// for the whole session (instruction files, <…instructions> elements, the environment and
// permissions a host states): a compaction keeps them like the head, byte-identical, never
// summarized or cut. The other host blocks are transient and may be summarized away. What is
// left of a user message without its host blocks is the user's own words (UserWords).

// partKind is what one text part of a user message holds.
type partKind uint8

const (
	partWords     partKind = iota // the user's words (host blocks around them perhaps)
	partTransient                 // transient host blocks only
	partStanding                  // standing instructions (other blocks or words beside them perhaps)
)

// transientTags are the tags of the transient host blocks (compared without case).
var transientTags = []string{"system-reminder", "command-name", "command-message", "command-args",
	"local-command-stdout", "local-command-stderr", "local-command-caveat", "user-prompt-submit-hook",
	"bash-input", "bash-stdout", "bash-stderr", "environment_details", "ide_opened_file",
	"ide_selection", "ide_diagnostics", "recommended_plugins"}

// Claude Code also writes prose of its own into user messages: after it compacted the
// conversation itself, the first user message opens with its summary (continuedOpening),
// then the files it had open read again ("Called the Read tool with the following input:
// …", "Result of calling the Read tool: …"), and a slash command's messages come after its
// caveat ("Caveat: The messages below were generated by the user while running local
// commands. …"). Each is a text part of its own: transient host text, not the user's words.
// So is a hook's blocking feedback, which Claude Code sends as a user message of its own:
// "Stop hook feedback:\n[<command>]: <its output>" (hookFeedback).

// continuedOpening opens the summary Claude Code puts first after compacting on its own.
const continuedOpening = "This session is being continued from a previous conversation that ran out of context."

// hostText reports whether a user text part (trimmed) is prose a host wrote (see above).
func hostText(s string) bool {
	switch {
	case strings.HasPrefix(s, continuedOpening):
		return true
	case replayedTool(s, "Called the ", " tool with the following input: "),
		replayedTool(s, "Result of calling the ", " tool: "):
		return true
	case hookFeedback(s):
		return true
	case strings.HasPrefix(s, "Caveat: The messages below "):
		line, _, _ := strings.Cut(s, "\n") // (only then: most text opens otherwise)
		return strings.Contains(line, "generated by the user while running local commands")
	}
	return false
}

// hookFeedback reports whether s opens with the line a host writes above a hook's blocking
// feedback: the name of a hook event whose feedback Claude Code sends as a user message
// (hookEvents), then " hook feedback:", alone on its line. Another word before it ("Git hook
// feedback:") is the user's. It reads no more of s than that line's opening.
func hookFeedback(s string) bool {
	for _, event := range hookEvents {
		rest, ok := strings.CutPrefix(s, event)
		if !ok {
			continue
		}
		if rest, ok = strings.CutPrefix(rest, " hook feedback:"); ok {
			if rest = strings.TrimPrefix(rest, "\r"); strings.HasPrefix(rest, "\n") {
				return true
			}
		}
	}
	return false
}

// hookEvents are Claude Code's hook events that may block with feedback to the model.
var hookEvents = []string{"Stop", "SubagentStop", "TeammateIdle", "TaskCreated", "TaskCompleted",
	"PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "UserPromptSubmit", "PreCompact"}

// replayedTool reports whether s is Claude Code's prose of a tool call it replayed after
// compacting: open, the tool's name (one word), mid, then a JSON value (the call's input
// object, the result's quoted text) to the end of s. A user's words that open the same way
// go on in prose, which is no JSON value.
func replayedTool(s, open, mid string) bool {
	rest, ok := strings.CutPrefix(s, open)
	if !ok {
		return false
	}
	name, val, ok := strings.Cut(rest, mid)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") {
		return false
	}
	val = strings.TrimSpace(val)
	return val != "" && (val[0] == '{' || val[0] == '"') && json.Valid([]byte(val))
}

// ContinuedSummary returns the summary a user text part holds when a host wrote it after
// compacting the conversation on its own (Claude Code's "This session is being continued from
// a previous conversation …"): an earlier summary, which the next one carries forward. It is
// the text without the host's opening line and, when the host's model drafted an
// "Analysis:" before its "Summary:" (as Claude Code's does), without the draft: the summary
// says what the draft worked out.
func ContinuedSummary(text string) (string, bool) {
	s := strings.TrimSpace(text)
	if !strings.HasPrefix(s, continuedOpening) {
		return "", false
	}
	_, s, _ = strings.Cut(s, "\n") // the opening line, "… The conversation is summarized below:"
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, continuedDraft) {
		for _, open := range []string{"\n" + continuedSummary + "\n", "\n" + continuedSummary + " "} {
			if _, after, ok := strings.Cut(s, open); ok {
				s = strings.TrimSpace(after)
				break
			}
		}
	}
	if rest, ok := strings.CutPrefix(s, continuedSummary+"\n"); ok {
		s = strings.TrimSpace(rest)
	}
	return s, true
}

// Claude Code's own summary opens with its model's draft (continuedDraft) and then the
// summary proper, on a line of its own (continuedSummary).
const (
	continuedDraft   = "Analysis:"
	continuedSummary = "Summary:"
)

// standingTags are the tags of elements that hold standing instructions whatever they say
// (compared without case), besides any tag ending in "instructions" (Codex's <INSTRUCTIONS>,
// <user_instructions>, a harness's <instructions>).
var standingTags = []string{"environment_context", "permissions"}

// instructionFiles are the instruction files whose contents a host's block may quote ("Contents
// of /repo/CLAUDE.md (project instructions, …)", as Claude Code writes them).
var instructionFiles = []string{"CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", "GEMINI.md"}

// claudeMdHeading opens the CLAUDE.md section of Claude Code's context reminder.
const claudeMdHeading = "# claudeMd"

// standingHeading is in the first line of a text part that Codex opens with its AGENTS.md
// heading ("# AGENTS.md instructions for /repo").
const standingHeading = " instructions for "

// StandingPart reports whether p is a text part holding standing instructions (see the host
// block rules above): a compaction keeps it byte-identical, never summarized or cut.
func StandingPart(p *compactorv1.Part) bool {
	t := p.GetText()
	if t == nil {
		return false
	}
	k, _ := textKind(t.GetText())
	return k == partStanding
}

// hostFlags returns, for a user message with text, flagStanding when a part holds standing
// instructions, flagStandingOnly when every part does, and flagNoWords when its text is host
// blocks only.
func hostFlags(m *compactorv1.Message) textFlags {
	var fl textFlags
	only, words, host, ownWords := true, false, false, false
	for _, p := range m.GetParts() {
		t := p.GetText()
		if t == nil {
			only = false
			continue
		}
		k, w := textKind(t.GetText())
		words = words || w
		ownWords = ownWords || w && k == partWords // words that stay when the standing parts split off
		host = host || k == partTransient
		switch {
		case k == partStanding:
			fl |= flagStanding
		case strings.TrimSpace(t.GetText()) != "":
			only = false
		}
	}
	if fl&flagStanding != 0 && only {
		fl |= flagStandingOnly
	}
	if !words {
		fl |= flagNoWords
	} else if host && ownWords {
		fl |= flagHostParts
	}
	return fl
}

// hostPart reports whether p is a text part of transient host text alone: host blocks that
// are not standing instructions, or a host's prose (see the host block rules above).
func hostPart(p *compactorv1.Part) bool {
	t := p.GetText()
	if t == nil {
		return false
	}
	k, _ := textKind(t.GetText())
	return k == partTransient
}

// RequestWords returns the user request m as a compaction keeps it verbatim: without its
// parts of standing instructions (which join the head) and of transient host text alone
// (which the summary folds, as Claude Code's own summary and the files it read again after
// it compacted): the user's words, with the host blocks inside their parts. A message with
// neither is returned as it is; otherwise m is not modified, the parts are shared.
func RequestWords(m *compactorv1.Message) *compactorv1.Message {
	if messageFlags(m)&(flagStanding|flagHostParts) == 0 {
		return m
	}
	keep := make([]*compactorv1.Part, 0, len(m.GetParts()))
	for _, p := range m.GetParts() {
		if !StandingPart(p) && !hostPart(p) {
			keep = append(keep, p)
		}
	}
	return withParts(m, keep)
}

// standingOnly reports whether m is a user message whose every part holds standing
// instructions: a message of the head (InHead).
func standingOnly(m *compactorv1.Message) bool {
	if m.GetRole() != compactorv1.Role_ROLE_USER || m.GetKind() != compactorv1.MessageKind_MESSAGE_KIND_UNSPECIFIED {
		return false
	}
	for _, p := range m.GetParts() {
		if t := p.GetText(); t == nil || !mayHoldBlock(t.GetText()) && strings.TrimSpace(t.GetText()) != "" {
			return false // the cheap test first: most user text opens with no block (an empty part is none)
		}
	}
	return messageFlags(m)&flagStandingOnly != 0
}

// mayHoldBlock reports whether text could start or end with a host block.
func mayHoldBlock(text string) bool {
	s := strings.TrimSpace(text)
	return s != "" && (s[0] == '<' || s[0] == '#' || s[len(s)-1] == '>')
}

// textKind returns what a text part of a user message holds, and whether any of it is the
// user's words.
func textKind(text string) (partKind, bool) {
	s := strings.TrimSpace(text)
	if hostText(s) {
		return partTransient, false
	}
	if s == "" || !mayHoldBlock(s) {
		return partWords, s != ""
	}
	if agentsHeading(s) {
		return partStanding, false
	}
	standing, transient, words := false, false, false
	eachHostBlock(s, func(k partKind, _, _ int) {
		switch k {
		case partStanding:
			standing = true
		case partTransient:
			transient = true
		default:
			words = true
		}
	})
	switch {
	case standing:
		return partStanding, words
	case transient && !words:
		return partTransient, false
	}
	return partWords, words
}

// agentsHeading reports whether s opens with Codex's heading of an instruction file.
func agentsHeading(s string) bool {
	if !strings.HasPrefix(s, "# ") {
		return false
	}
	line, _, _ := strings.Cut(s, "\n")
	return strings.Contains(line, standingHeading) && strings.Contains(line, ".md")
}

// eachHostBlock calls f with the kind and the span of each part of s (trimmed) in order: the
// elements s starts with, then what lies between them and the elements it ends with (the
// words, as partWords), then those. An element no rule names is partWords.
func eachHostBlock(s string, f func(k partKind, start, end int)) {
	lo, hi := 0, len(s)
	for lo < hi {
		name, body, n, ok := leadingElement(s[lo:hi])
		if !ok {
			break
		}
		f(elementKind(name, body), lo, lo+n)
		lo += n
		for lo < hi && isSpace(s[lo]) {
			lo++
		}
	}
	type span struct {
		k          partKind
		start, end int
	}
	var tail [4]span // the elements s ends with, last first; more than four are words
	nt := 0
	for lo < hi && nt < len(tail) {
		name, body, at, ok := trailingElement(s[lo:hi])
		if !ok {
			break
		}
		tail[nt] = span{elementKind(name, body), lo + at, hi}
		nt++
		hi = lo + at
		for hi > lo && isSpace(s[hi-1]) {
			hi--
		}
	}
	if lo < hi {
		f(partWords, lo, hi)
	}
	for i := nt - 1; i >= 0; i-- {
		f(tail[i].k, tail[i].start, tail[i].end)
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

// elementKind is the kind of the element <name>body</name>.
func elementKind(name, body string) partKind {
	switch {
	case standingTag(name) || quotesInstructionFiles(body):
		return partStanding
	case anyFold(transientTags, name):
		return partTransient
	}
	return partWords
}

// standingTag reports whether an element named name holds standing instructions whatever it
// says.
func standingTag(name string) bool {
	const suffix = "instructions"
	n := len(name)
	return n >= len(suffix) && strings.EqualFold(name[n-len(suffix):], suffix) || anyFold(standingTags, name)
}

// quotesInstructionFiles reports whether a block's body quotes instruction files as Claude
// Code's context reminder does.
func quotesInstructionFiles(body string) bool {
	if strings.Contains(body, claudeMdHeading) {
		return true
	}
	const contents = "Contents of "
	for rest := body; ; {
		k := strings.Index(rest, contents)
		if k < 0 {
			return false
		}
		// The rest of the line is read once: another "Contents of " on it names a suffix of it.
		line, after, _ := strings.Cut(rest[k+len(contents):], "\n")
		for _, f := range instructionFiles {
			if strings.Contains(line, f) {
				return true
			}
		}
		rest = after
	}
}

func anyFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// tagByte reports whether c may be in an element's name (a letter first).
func tagByte(c byte, first bool) bool {
	letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	return letter || !first && (c >= '0' && c <= '9' || c == '_' || c == '-' || c == ':')
}

// leadingElement parses the element s starts with, "<name …>body</name>": its name, its body
// and its length; ok is false when s starts with no complete element.
func leadingElement(s string) (name, body string, n int, ok bool) {
	if len(s) < 3 || s[0] != '<' {
		return "", "", 0, false
	}
	i := 1
	for i < len(s) && tagByte(s[i], i == 1) {
		i++
	}
	if i == 1 || i == len(s) || s[i] != '>' && !isSpace(s[i]) {
		return "", "", 0, false
	}
	name = s[1:i]
	gt := strings.IndexByte(s[i:], '>')
	if gt < 0 {
		return "", "", 0, false
	}
	open := i + gt + 1
	end := indexClose(s[open:], name)
	if end < 0 {
		return "", "", 0, false
	}
	return name, s[open : open+end], open + end + len(name) + 3, true
}

// indexClose returns the index in s of the closing tag </name>, or -1.
func indexClose(s, name string) int {
	for off := 0; ; {
		k := strings.Index(s[off:], "</")
		if k < 0 {
			return -1
		}
		at := off + k
		if rest := s[at+2:]; strings.HasPrefix(rest, name) && len(rest) > len(name) && rest[len(name)] == '>' {
			return at
		}
		off = at + 2
	}
}

// trailingElement parses the element s ends with, "<name …>body</name>", preceded by nothing
// or by white space: its name, its body and where it starts; ok is false when s ends with no
// complete element.
func trailingElement(s string) (name, body string, at int, ok bool) {
	if len(s) < 3 || s[len(s)-1] != '>' {
		return "", "", 0, false
	}
	k := strings.LastIndex(s, "</")
	if k < 0 {
		return "", "", 0, false
	}
	name = s[k+2 : len(s)-1]
	for i := 0; i < len(name); i++ {
		if !tagByte(name[i], i == 0) {
			return "", "", 0, false
		}
	}
	if name == "" {
		return "", "", 0, false
	}
	for j := k - 1; j >= 0; j-- {
		j = strings.LastIndexByte(s[:j+1], '<')
		if j < 0 {
			break
		}
		rest := s[j+1:]
		if !strings.HasPrefix(rest, name) || len(rest) == len(name) || rest[len(name)] != '>' && !isSpace(rest[len(name)]) {
			continue
		}
		if j > 0 && !isSpace(s[j-1]) {
			return "", "", 0, false
		}
		gt := strings.IndexByte(rest, '>')
		if j+1+gt+1 > k {
			return "", "", 0, false
		}
		return name, s[j+1+gt+1 : k], j, true
	}
	return "", "", 0, false
}

// UserWords returns the user's own words in m: its text parts, each without the host blocks
// around its words (see the host block rules above), joined by newlines. The words inside an
// element no rule names stay, tags included.
func UserWords(m *compactorv1.Message) string {
	var b strings.Builder
	for _, p := range m.GetParts() {
		t := p.GetText()
		if t == nil {
			continue
		}
		s := strings.TrimSpace(t.GetText())
		if s == "" || agentsHeading(s) || hostText(s) {
			continue
		}
		prev := -1 // the end of the words just written, while no block follows them
		eachHostBlock(s, func(k partKind, start, end int) {
			switch {
			case k != partWords:
				prev = -1
				return
			case prev >= 0:
				b.WriteString(s[prev:start]) // words next to words: as they were
			case b.Len() > 0:
				b.WriteByte('\n')
			}
			b.WriteString(s[start:end])
			prev = end
		})
	}
	return b.String()
}

// SplitInstructions returns the parts of m that hold standing instructions as a message of
// their own (m's role and kind, nothing else), and m without them (see withParts); for a message without such parts, nil and m. m is not modified; the
// parts are shared.
func SplitInstructions(m *compactorv1.Message) (standing, rest *compactorv1.Message) {
	var keep, other []*compactorv1.Part
	for _, p := range m.GetParts() {
		if StandingPart(p) {
			keep = append(keep, p)
		} else {
			other = append(other, p)
		}
	}
	if keep == nil {
		return nil, m
	}
	return &compactorv1.Message{Role: m.GetRole(), Kind: m.GetKind(), Parts: keep}, withParts(m, other)
}

// sourceExtensions are the file extensions that make a bare word a file name.
var sourceExtensions = func() map[string]bool {
	m := map[string]bool{}
	for _, e := range strings.Fields("go py pyi rs ts tsx js jsx mjs cjs java kt scala c h cc cpp hpp cs rb php swift sh bash zsh md rst json yaml yml toml proto sql txt cfg ini conf html css scss lock mod sum xml csv ipynb gradle vue svelte lua dart tf log diff patch") {
		m[e] = true
	}
	return m
}()

// IsFileName reports whether w is a file name with a known source or text extension
// (main.go, reproduce_issue.py, Cargo.toml): a name of letters, digits, _ - . @ and an
// extension from the list.
func IsFileName(w string) bool {
	dot := strings.LastIndexByte(w, '.')
	if dot <= 0 || dot == len(w)-1 || !sourceExtensions[strings.ToLower(w[dot+1:])] {
		return false
	}
	letter := false
	for i := 0; i < dot; i++ {
		switch c := w[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			letter = true
		case c >= '0' && c <= '9', c == '_', c == '-', c == '.', c == '@':
		default:
			return false
		}
	}
	return letter
}

// maxPathBytes bounds a word that can be a path.
const maxPathBytes = 120

// IsPathLike reports whether w names a file: a path (IsPath) or a file name (IsFileName).
func IsPathLike(w string) bool { return IsPath(w) || IsFileName(w) }

// IsPath reports whether the word w is a file or directory path: the one rule for paths of
// every package. A path is 3 to maxPathBytes bytes of letters, digits and _ - . @ ~ + /,
// with a letter and a slash, and either relative to a known directory (./run, ../x,
// ~/.bashrc), or with two slashes or more and two named elements (a/b/c, src/lib/,
// /etc/hosts), or whose last element is a file name (IsFileName: src/x.py, /setup.py). Not
// paths: words with one slash and no file name (src/lib, and/or, TCP/IP, /tmp, pieces of a
// sed script such as s/parent.config.getini and /parent.getini), a lone element between
// slashes (the /.git/ of */.git/*), URLs and words with "//" or "...", sed scripts (s/a/b/g,
// y/ab/cd/), and device files (/dev/null).
func IsPath(w string) bool {
	if len(w) < 3 || len(w) > maxPathBytes || !strings.Contains(w, "/") ||
		strings.Contains(w, "//") || strings.Contains(w, "...") {
		return false
	}
	letter := false
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !pathByte(c) {
			return false
		}
		letter = letter || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	switch {
	case !letter, strings.HasPrefix(w, "s/"), strings.HasPrefix(w, "y/"), strings.HasPrefix(w, "/dev/"):
		return false
	case strings.HasPrefix(w, "./"), strings.HasPrefix(w, "../"), strings.HasPrefix(w, "~/"):
		return strings.Trim(w, "/.~") != ""
	}
	return IsFileName(w[strings.LastIndexByte(w, '/')+1:]) ||
		strings.Count(w, "/") >= 2 && pathElements(w) >= 2
}

// pathElements is the number of elements of the path w other than "", "." and "..".
func pathElements(w string) int {
	n := 0
	for e := range strings.SplitSeq(w, "/") {
		if e != "" && e != "." && e != ".." {
			n++
		}
	}
	return n
}

// pathByte reports whether c may appear in a path word.
func pathByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '-' || c == '.' || c == '/' || c == '@' || c == '~' || c == '+'
}

// PathsIn returns the paths (IsPath) named in text, in order: its words of path bytes, a
// sentence's final dots trimmed; a word after a colon is part of a URL.
func PathsIn(text string) []string {
	var out []string
	for i := 0; i < len(text); {
		if !pathByte(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && pathByte(text[j]) {
			j++
		}
		w := strings.TrimRight(text[i:j], ".")
		url := i >= 1 && text[i-1] == ':'
		i = j
		if !url && IsPath(w) {
			out = append(out, w)
		}
	}
	return out
}

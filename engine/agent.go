package engine

import (
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
	"Observation:", "OBSERVATION:", "[Tool result", "Tool output:"}

// SWE-agent's prompt state line, "(Open file: …) (Current directory: …) bash-$", contains
// promptStateDir and ends with promptStateEnd.
const (
	promptStateDir = "(Current directory:"
	promptStateEnd = "bash-$"
)

// observed is the observation rule (a text-protocol agent's tool output starts with a known
// observation prefix, or ends with SWE-agent's prompt state line) over a user text given as
// its first and last nonblank text parts, trimmed (the whole trimmed text for both when it
// is one), and whether any part contains promptStateDir. No prefix or marker contains a newline, so the
// rule reads the parts as it would their join.
func observed(first, last string, dir bool) bool {
	for _, p := range observationPrefixes {
		if strings.HasPrefix(first, p) {
			return true
		}
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

// UserText returns the text parts of a message joined by newlines, and whether the message
// is text only (no tool results, images or files).
func UserText(m *compactorv1.Message) (text string, textOnly bool) {
	var parts []string
	textOnly = true
	for _, p := range m.GetParts() {
		if t := p.GetText(); t != nil {
			parts = append(parts, t.GetText())
			continue
		}
		textOnly = false
	}
	return strings.Join(parts, "\n"), textOnly
}

// issuesCommand reports whether an assistant message runs a command the next user message
// answers with its output: a fenced code block in a message without tool calls (function
// calling agents answer with tool results, not user text).
func issuesCommand(m *compactorv1.Message) bool {
	block := false
	for _, p := range m.GetParts() {
		if p.GetToolCall() != nil {
			return false
		}
		if t := p.GetText(); t != nil && strings.Contains(t.GetText(), "```") {
			block = true
		}
	}
	return block
}

// Requests returns the indexes of the user's requests among msgs, oldest first: the first
// user message that is not a demonstration (the task), and every later user message of text
// only that is neither a tool observation (IsObservation, or the answer to a text-protocol
// command) nor a demonstration. Head messages (InHead), compaction prompts and summaries,
// and user messages without text are never requests.
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
)

// ClassifyUsers returns the kind of each message of msgs: 0 for messages that are not user
// messages with text (and for head messages, compaction prompts and summaries). compacted
// says msgs follow an earlier summary: the first user message is then a request only if it
// reads as one (the task rule applies to a conversation from its start).
func ClassifyUsers(msgs []*compactorv1.Message, compacted bool) []UserKind {
	out := make([]UserKind, len(msgs))
	eachUserText(msgs, 0, !compacted, func(i int, k UserKind) { out[i] = k })
	return out
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
	for i := from; i < len(msgs); i++ {
		m := msgs[i]
		afterCommand := command
		switch m.GetRole() {
		case compactorv1.Role_ROLE_ASSISTANT:
			command = flags(i)&flagCommand != 0
			continue
		case compactorv1.Role_ROLE_USER:
			command = false
		default:
			command = false
			continue
		}
		if InHead(m) || m.GetKind() != compactorv1.MessageKind_MESSAGE_KIND_UNSPECIFIED {
			continue
		}
		fl := flags(i)
		switch {
		case fl&flagEmpty != 0:
		case fl&flagDemo != 0:
			f(i, UserDemonstration)
		case !task:
			task = true
			f(i, UserRequest)
		case fl&flagTextOnly == 0:
			f(i, UserOther)
		case afterCommand || fl&flagObservation != 0:
			f(i, UserObservation)
		default:
			f(i, UserRequest)
		}
	}
}

// textFlags are what the rules of agent talk read of one message's text: set once per
// message content (messageFlags), so that classifying a conversation does not read its text
// again.
type textFlags uint8

const (
	flagKnown       textFlags = 1 << iota // the flags below were read
	flagTextOnly                          // a user message of text only
	flagEmpty                             // a user message without text
	flagObservation                       // a user message whose text reads as a tool's output (IsObservation)
	flagDemo                              // a user message carrying a few-shot demonstration
	flagCommand                           // an assistant message issuing a text-protocol command (issuesCommand)
)

// messageFlags reads the text flags of m.
func messageFlags(m *compactorv1.Message) textFlags {
	fl := flagKnown
	switch m.GetRole() {
	case compactorv1.Role_ROLE_ASSISTANT:
		if issuesCommand(m) {
			fl |= flagCommand
		}
	case compactorv1.Role_ROLE_USER:
		fl |= readUserMessage(m)
	}
	return fl
}

// readUserMessage reads a user message as eachRequest needs it, without joining its text
// parts: flagTextOnly (no tool results, images or files), flagEmpty (no text),
// flagObservation (IsObservation of its joined text) and flagDemo (carries a
// demonstration).
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
	if observed(first, last, dir) {
		fl |= flagObservation
	}
	if demo {
		fl |= flagDemo
	}
	return fl
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

// IsPathLike reports whether w looks like a file path or a file name (IsFileName): a word of
// letters, digits, _ - . @ and / with a letter, whose last element is a file name, or which
// has two slashes or more (a/b/c.go, /etc/hosts, src/lib/), or starts with ./ or ../ (./x).
// A word with one slash and no file name, such as src/lib, is not; nor are URLs and words
// with "//".
func IsPathLike(w string) bool {
	if len(w) < 3 || len(w) > maxPathBytes || strings.Contains(w, "://") || strings.HasPrefix(w, "//") {
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
	if slashes == 0 {
		return IsFileName(last)
	}
	if strings.Contains(w, "//") || last == "" && slashes == 1 {
		return false
	}
	return IsFileName(last) || slashes >= 2 || strings.HasPrefix(w, "./") || strings.HasPrefix(w, "../")
}

// pathByte reports whether c may appear in a path word.
func pathByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '-' || c == '.' || c == '/' || c == '@' || c == '~' || c == '+'
}

// PathsIn returns the file paths named in text: words of the form dir/…/name.ext (at least
// one directory, a name with an extension of 1 to 8 letters or digits, at least one
// letter). URLs and words with "//" are not paths.
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
		if !url && isPath(w) {
			out = append(out, w)
		}
	}
	return out
}

func isPath(w string) bool {
	if strings.Contains(w, "//") || strings.Contains(w, "...") {
		return false
	}
	slash := strings.LastIndexByte(w, '/')
	if slash <= 0 { // no directory, or "/name.ext" at the root
		return false
	}
	dir, name := w[:slash], w[slash+1:]
	if strings.Trim(dir, "/.~") == "" {
		return false
	}
	dot := strings.LastIndexByte(name, '.')
	if dot <= 0 || dot == len(name)-1 {
		return false
	}
	ext := name[dot+1:]
	if len(ext) > 8 {
		return false
	}
	letter := false
	for k := 0; k < len(ext); k++ {
		c := ext[k]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			letter = true
		case c >= '0' && c <= '9':
		default:
			return false
		}
	}
	return letter
}

// Package fidelity decides what a compacted conversation must keep of the range it
// summarized, checks summaries against it and measures it. One set of rules serves both: the
// user's requests (the task and every text-only user request) and the file paths the agent
// or the user named. The checker (Check) appends what a summary dropped; the measure
// (Measure) reports what a compaction kept, so the figures of `make fidelity` are the
// figures the checker enforces.
package fidelity

import (
	"encoding/json"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

// MinLineChars is the length (in bytes, after whitespace normalisation) from which a line of
// a request counts: shorter lines ("Thanks!", "ok") are not worth a check.
const MinLineChars = 15

// Request is one user request of a summarized range.
type Request struct {
	// Index is the position of the request's message in the range.
	Index int
	// Text is the message's text, as sent.
	Text string
	// Lines are its whitespace-normalised lines of MinLineChars or more.
	Lines []string
}

// observationPrefixes start the tool outputs that text-protocol agents (mini-swe-agent,
// SWE-agent without function calling, ReAct loops) send back as user messages.
var observationPrefixes = []string{"<returncode>", "<output>", "<tool_result", "<function_results>",
	"Observation:", "OBSERVATION:", "[Tool result", "Tool output:"}

// IsObservation reports whether a user text is a text-protocol agent's tool output: it
// starts with a known observation prefix or ends with SWE-agent's prompt state line.
func IsObservation(text string) bool {
	text = strings.TrimSpace(text)
	for _, p := range observationPrefixes {
		if strings.HasPrefix(text, p) {
			return true
		}
	}
	return strings.Contains(text, "(Current directory:") && strings.HasSuffix(text, "bash-$")
}

// issuesCommand reports whether an assistant message runs a command the next user message
// answers with its output: a tool call, or (text-protocol agents) a fenced code block.
// The user message after it is an observation, not a request.
func issuesCommand(m *compactorv1.Message) bool {
	for _, p := range m.GetParts() {
		if p.GetToolCall() != nil {
			return false // function-calling agents answer with tool results, not user text
		}
		if t := p.GetText(); t != nil && strings.Contains(t.GetText(), "```") {
			return true
		}
	}
	return false
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

// userText returns the text of a user message and whether it is text only (no tool results,
// images or files).
func userText(m *compactorv1.Message) (string, bool) {
	var parts []string
	textOnly := true
	for _, p := range m.GetParts() {
		if t := p.GetText(); t != nil {
			parts = append(parts, t.GetText())
			continue
		}
		textOnly = false
	}
	return strings.Join(parts, "\n"), textOnly
}

// summarized reports whether m is a message a summary replaces (not head, not a compaction
// artefact).
func summarized(m *compactorv1.Message) bool {
	switch m.GetKind() {
	case compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT, compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY:
		return false
	}
	return !engine.InHead(m)
}

// Requests returns the requests of a summarized range: the first user message that is not a
// demonstration (the task), and every user message of text only that is neither a tool
// observation nor a demonstration. Requests without a line of MinLineChars are left out
// (nothing to check).
func Requests(msgs []*compactorv1.Message) []Request {
	var out []Request
	task := false
	command := false // the previous message was an assistant's text-protocol command
	for i, m := range msgs {
		afterCommand := command
		command = m.GetRole() == compactorv1.Role_ROLE_ASSISTANT && issuesCommand(m)
		if m.GetRole() != compactorv1.Role_ROLE_USER || !summarized(m) {
			continue
		}
		text, textOnly := userText(m)
		if strings.TrimSpace(text) == "" || IsDemonstration(text) {
			continue
		}
		isTask := !task
		task = true
		if !isTask && (!textOnly || afterCommand || IsObservation(text)) {
			continue
		}
		if lines := Lines(text); len(lines) > 0 {
			out = append(out, Request{Index: i, Text: text, Lines: lines})
		}
	}
	return out
}

// Normalize collapses every run of white space in s to one space and trims the ends.
func Normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

// Lines returns the whitespace-normalised lines of text that have MinLineChars bytes or
// more, in order, without duplicates.
func Lines(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		if l = Normalize(l); len(l) >= MinLineChars && !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// Paths returns the distinct file paths (dir/…/name.ext) named in the range by an assistant
// message (its text or a tool call's input) or by one of reqs, in order of first mention.
// Paths only listed in tool output are not included.
func Paths(msgs []*compactorv1.Message, reqs []Request) []string {
	var out []string
	seen := map[string]bool{}
	add := func(text string) {
		for _, p := range PathsIn(text) {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	r := 0
	for i, m := range msgs {
		for r < len(reqs) && reqs[r].Index < i {
			r++
		}
		if r < len(reqs) && reqs[r].Index == i {
			add(reqs[r].Text)
			continue
		}
		if m.GetRole() != compactorv1.Role_ROLE_ASSISTANT || !summarized(m) {
			continue
		}
		for _, p := range m.GetParts() {
			if t := p.GetText(); t != nil {
				add(t.GetText())
			}
			if tc := p.GetToolCall(); tc != nil {
				for _, s := range jsonStrings(tc.GetInputJson()) {
					add(s)
				}
			}
		}
	}
	return out
}

// jsonStrings returns the string values of a JSON document, or the
// document itself when it is not JSON.
func jsonStrings(doc string) []string {
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		return []string{doc}
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
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

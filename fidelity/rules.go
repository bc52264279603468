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

// summarized reports whether m is a message a summary replaces (not head, not a compaction
// artefact).
func summarized(m *compactorv1.Message) bool {
	switch m.GetKind() {
	case compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT, compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY:
		return false
	}
	return !engine.InHead(m)
}

// Requests returns the requests of a summarized range (engine.Requests: the task and every
// later text-only user request that is neither a tool observation nor a demonstration),
// with the lines of the user's own words (engine.UserWords: the standing instructions beside
// them are kept in the head, transient reminders may go). Requests without a line of
// MinLineChars are left out (nothing to check).
func Requests(msgs []*compactorv1.Message) []Request {
	return requests(msgs, engine.Requests(msgs))
}

// RangeRequests is Requests of a summarized range rng beside the messages kept before it
// (the head): when the head keeps the task (engine.HeadTask), the range's first user message
// is a request only if it reads as one, not as the task.
func RangeRequests(rng, kept []*compactorv1.Message) []Request {
	if !engine.HeadTask(kept) {
		return Requests(rng)
	}
	var idx []int
	for i, k := range engine.ClassifyUsers(rng, true) {
		if k == engine.UserRequest {
			idx = append(idx, i)
		}
	}
	return requests(rng, idx)
}

// requests is the requests of msgs at indexes idx that have a line to check.
func requests(msgs []*compactorv1.Message, idx []int) []Request {
	var out []Request
	for _, i := range idx {
		text := engine.UserWords(msgs[i])
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

// Paths returns the distinct paths (engine.IsPath: src/x.py, a/b/c, /etc/hosts, ./run) named
// in the range by an assistant message (its text or a tool call's input) or by one of reqs,
// in order of first mention. Paths only listed in tool output are not included.
func Paths(msgs []*compactorv1.Message, reqs []Request) []string {
	var out []string
	seen := map[string]bool{}
	add := func(text string) {
		for _, p := range engine.PathsIn(text) {
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

package fidelity

import (
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

// FactKind is the kind of an identifier the continuation-recall measure counts.
type FactKind uint8

// The kinds of facts, in the order a word is classified: the first that fits wins.
const (
	FactPath   FactKind = iota // a path: src/x.py, /testbed/setup.cfg, ./run.sh
	FactFile                   // a bare file name with a known extension: reproduce_issue.py
	FactDotted                 // a dotted name: django.db.models, self.assertEqual
	FactSnake                  // a snake_case name: build_filter, MAX_RETRIES
	FactCamel                  // a CamelCase or lowerCamel name: ValueError, getUser
	FactID                     // an id mixing letters and digits: HAT170, ZFA04Y
	FactNumber                 // a number of 3 digits or more, dates and times too: 4421486, 2024-05-15
	FactQuoted                 // a short quoted string: "economy", 'utf-8'
	NumFactKinds
)

var factKindNames = [NumFactKinds]string{"path", "file name", "dotted", "snake_case", "CamelCase", "id", "number", "quoted"}

// String names the kind as the report prints it.
func (k FactKind) String() string {
	if k < NumFactKinds {
		return factKindNames[k]
	}
	return "unknown"
}

// Fact is one identifier.
type Fact struct {
	Text string
	Kind FactKind
}

// Bounds on what counts as a fact, in bytes.
const (
	factMinBytes    = 3
	factMaxBytes    = 120
	quotedMinBytes  = 3
	quotedMaxBytes  = 40
	dottedMinBytes  = 5
	idMinBytes      = 4
	numberMinDigits = 3
)

// Facts returns the distinct facts of text in order of first occurrence: the words that are
// paths, file names, dotted, snake_case or CamelCase names, ids mixing letters and digits,
// numbers of three digits or more, and the short strings in double or single quotes.
func Facts(text string) []Fact {
	var out []Fact
	seen := map[string]bool{}
	add := func(s string, k FactKind) {
		if !seen[s] {
			seen[s] = true
			out = append(out, Fact{Text: s, Kind: k})
		}
	}
	for i := 0; i < len(text); {
		if !factByte(text[i]) {
			if q := text[i]; q == '"' || q == '\'' {
				if s, ok := quoted(text[i+1:], q); ok {
					add(s, FactQuoted)
				}
			}
			i++
			continue
		}
		j := i
		for j < len(text) && factByte(text[j]) {
			j++
		}
		w := strings.TrimLeft(strings.TrimRight(text[i:j], ".-:@+~"), "-:@+")
		url := strings.HasPrefix(text[j:], "://") || i >= 3 && strings.HasSuffix(text[:i], "://")
		i = j
		if url || len(w) < factMinBytes || len(w) > factMaxBytes {
			continue
		}
		if k, ok := classify(w); ok {
			add(w, k)
		}
	}
	return out
}

// factByte reports whether c may appear inside a fact word.
func factByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '-' || c == '.' || c == '/' || c == '~' || c == '@' || c == '+' || c == ':'
}

// quoted returns the string up to the closing quote q when it is a short single-line quote.
func quoted(rest string, q byte) (string, bool) {
	end := strings.IndexByte(rest, q)
	if end < quotedMinBytes || end > quotedMaxBytes {
		return "", false
	}
	s := rest[:end]
	if strings.ContainsAny(s, "\n\r") || strings.TrimSpace(s) != s {
		return "", false
	}
	return s, true
}

// classify returns the kind of the word w, if it is a fact.
func classify(w string) (FactKind, bool) {
	var letters, digits, upper, other int
	lowerUpper := false // a lower-case letter followed by an upper-case one
	for k := 0; k < len(w); k++ {
		c := w[k]
		switch {
		case c >= 'a' && c <= 'z':
			letters++
		case c >= 'A' && c <= 'Z':
			letters++
			upper++
			if k > 0 && w[k-1] >= 'a' && w[k-1] <= 'z' {
				lowerUpper = true
			}
		case c >= '0' && c <= '9':
			digits++
		default:
			other++
		}
	}
	switch {
	case strings.Contains(w, "/"):
		if engine.IsPath(w) {
			return FactPath, true
		}
		return 0, false
	case letters == 0:
		if digits >= numberMinDigits && strings.Trim(w, "0123456789.:-") == "" {
			return FactNumber, true
		}
		return 0, false
	case engine.IsFileName(w):
		return FactFile, true
	case strings.Contains(w, "."):
		if len(w) >= dottedMinBytes && dottedName(w) {
			return FactDotted, true
		}
		return 0, false
	case strings.Contains(strings.Trim(w, "_"), "_") && identifier(w):
		return FactSnake, true
	case lowerUpper && identifier(w) && other == 0:
		return FactCamel, true
	case digits > 0 && len(w) >= idMinBytes && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") == "":
		return FactID, true
	}
	return 0, false
}

// dottedName reports whether w is two or more identifiers joined by dots.
func dottedName(w string) bool {
	parts := strings.Split(w, ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || !identifier(p) || p[0] >= '0' && p[0] <= '9' {
			return false
		}
	}
	return true
}

// identifier reports whether w is made of letters, digits and underscores only.
func identifier(w string) bool {
	for k := 0; k < len(w); k++ {
		c := w[k]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return w != ""
}

// VisibleText returns what a model is shown of msgs as one text: text parts, the string
// values of tool-call inputs, and tool outputs (reasoning, images and files left out).
func VisibleText(msgs []*compactorv1.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		for _, p := range m.GetParts() {
			switch {
			case p.GetText() != nil:
				b.WriteString(p.GetText().GetText())
			case p.GetToolCall() != nil:
				b.WriteString(p.GetToolCall().GetToolName())
				for _, s := range jsonStrings(p.GetToolCall().GetInputJson()) {
					b.WriteString("\n")
					b.WriteString(s)
				}
			case p.GetToolResult() != nil:
				_, out := engine.ToolOutputText(p.GetToolResult().GetOutput())
				b.WriteString(out)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// AgentText returns what the agent itself wrote in msgs: the text of its (assistant)
// messages and the string values of its tool calls' inputs.
func AgentText(msgs []*compactorv1.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		if m.GetRole() != compactorv1.Role_ROLE_ASSISTANT {
			continue
		}
		for _, p := range m.GetParts() {
			switch {
			case p.GetText() != nil:
				b.WriteString(p.GetText().GetText())
			case p.GetToolCall() != nil:
				for _, s := range jsonStrings(p.GetToolCall().GetInputJson()) {
					b.WriteString(s)
					b.WriteString("\n")
				}
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

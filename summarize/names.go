package summarize

import "strings"

// Names are what a later turn needs verbatim and cannot guess: paths and file names, code
// names with dots, underscores or inner capitals, ids mixing letters and digits, numbers of
// three digits or more (line numbers, amounts, dates), and short quoted strings. The
// extractive summary ranks them by how the agent used them and spends its budget on the
// statements that carry the most of the highest ranked.

// Bounds on a name, in bytes.
const (
	nameMinBytes   = 3
	nameMaxBytes   = 120
	quotedMaxBytes = 40
	numberMinDigit = 3
)

// eachName calls f with every name in text, in order, repeats included.
func eachName(text string, f func(name string)) {
	for i := 0; i < len(text); {
		c := text[i]
		if c == '"' || c == '\'' {
			if s, ok := quotedName(text[i+1:], c); ok {
				f(s)
			}
			i++
			continue
		}
		if !nameByte(c) {
			i++
			continue
		}
		j := i
		for j < len(text) && nameByte(text[j]) {
			j++
		}
		w := strings.TrimRight(text[i:j], ".-/")
		i = j
		if isName(w) {
			f(w)
		}
	}
}

// nameByte reports whether c may be part of a name.
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '.' || c == '/' || c == '-' || c == '~' || c == '@'
}

// quotedName returns the short single-line string up to the closing quote q.
func quotedName(rest string, q byte) (string, bool) {
	end := strings.IndexByte(rest, q)
	if end < nameMinBytes || end > quotedMaxBytes {
		return "", false
	}
	s := rest[:end]
	if strings.TrimSpace(s) != s {
		return "", false
	}
	alnum := false
	for k := 0; k < len(s); k++ {
		switch c := s[k]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			alnum = true
		case c == ' ', c == '_', c == '-', c == '.', c == ':', c == '/', c == '@', c == ',', c >= 0x80:
		default:
			return "", false // code, not a value
		}
	}
	return s, alnum
}

// isName reports whether the word w is a name (see the file's comment); plain words are not.
func isName(w string) bool {
	if len(w) < nameMinBytes || len(w) > nameMaxBytes || w[0] == '-' || strings.Contains(w, "//") {
		return false
	}
	var letters, digits, inner int
	for k := 0; k < len(w); k++ {
		switch c := w[k]; {
		case c >= 'a' && c <= 'z':
			letters++
		case c >= 'A' && c <= 'Z':
			letters++
			if k > 0 && w[k-1] >= 'a' && w[k-1] <= 'z' {
				inner++
			}
		case c >= '0' && c <= '9':
			digits++
		}
	}
	switch {
	case letters == 0:
		return digits >= numberMinDigit
	case strings.ContainsAny(w, "/_"):
		return true
	case strings.Contains(w, "."):
		for _, p := range strings.Split(w, ".") {
			if len(p) < 2 && !(len(p) == 1 && p[0] >= 'a' && p[0] <= 'z' && strings.Count(w, ".") > 1) {
				return false // "e.g", "a.b" and version-like words
			}
		}
		return true
	}
	if strings.ContainsAny(w, "-~@") {
		return false
	}
	return inner > 0 || digits > 0 && len(w) >= 4
}

// Where a name was seen.
type nameSource uint8

const (
	fromAgent  nameSource = iota // the agent's text and its calls' arguments
	fromUser                     // the user's requests
	fromOutput                   // tool outputs and observations
)

// nameStat is what the walk learned of one name.
type nameStat struct {
	agent, user, output int // occurrences by source
	last                int // the seq of the latest occurrence
	seenInOutput        bool
	usedAfterOutput     bool // the agent used it after an output showed it: a value it carried on
}

// nameIndex ranks the names of a range.
type nameIndex struct {
	stats map[string]*nameStat
	end   int // the latest seq, for recency
	// focus holds the names of the code the agent works on: what it last read of each file
	// it then changed.
	focus map[string]bool
}

// note records every name of text, seen from src at seq.
func (n *nameIndex) note(text string, src nameSource, seq int) {
	if n.stats == nil {
		n.stats = make(map[string]*nameStat)
	}
	seen := map[string]bool{}
	eachName(text, func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		st := n.stats[name]
		if st == nil {
			st = new(nameStat)
			n.stats[name] = st
		}
		switch src {
		case fromAgent:
			st.agent++
			st.usedAfterOutput = st.usedAfterOutput || st.seenInOutput
		case fromUser:
			st.user++
		case fromOutput:
			st.output++
			st.seenInOutput = true
		}
		st.last = max(st.last, seq)
	})
	n.end = max(n.end, seq)
}

// weight is how much keeping name is worth: names the agent wrote itself, values it took
// from an output and used, and names seen lately weigh most; a name only ever shown in
// output weighs little.
func (n *nameIndex) weight(name string) float64 {
	st := n.stats[name]
	if st == nil {
		return 0
	}
	w := 0.5 + 2*float64(min(st.agent, 5)) + float64(min(st.user, 3)) + 0.3*float64(min(st.output, 5))
	if st.usedAfterOutput {
		w += 3
	}
	if n.focus[name] {
		w += 2
	}
	if n.end > 0 {
		w *= 0.5 + float64(st.last)/float64(n.end)
	}
	return w
}

// namesOf returns the distinct names of text, in order.
func namesOf(text string) []string {
	var out []string
	seen := map[string]bool{}
	eachName(text, func(name string) {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	})
	return out
}

package fidelity

import (
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// Continuation recall measures what a compacted conversation keeps of what the agent uses
// next: the facts (see Facts) that occur in the history and again in what the agent itself
// wrote after it (its text and its tool calls' arguments), and the share of them a compacted
// history still shows.

// Needed returns the facts of history that the agent uses in future: those of its visible
// text (VisibleText) that occur in the agent's own text in future (AgentText), in order of
// first occurrence in the history.
func Needed(history, future []*compactorv1.Message) []Fact {
	used := map[string]bool{}
	for _, f := range Facts(AgentText(future)) {
		used[f.Text] = true
	}
	var out []Fact
	for _, f := range Facts(VisibleText(history)) {
		if used[f.Text] {
			out = append(out, f)
		}
	}
	return out
}

// Recall reports, for each fact, whether the visible text of compacted holds it as a whole
// word: not inside a longer name (HAT170 is not in HAT1701).
func Recall(facts []Fact, compacted []*compactorv1.Message) []bool {
	text := VisibleText(compacted)
	kept := make([]bool, len(facts))
	for i, f := range facts {
		kept[i] = holdsWord(text, f.Text)
	}
	return kept
}

// holdsWord reports whether s occurs in text with no letter, digit or underscore right
// before or after it.
func holdsWord(text, s string) bool {
	for off := 0; ; {
		i := strings.Index(text[off:], s)
		if i < 0 {
			return false
		}
		i += off
		j := i + len(s)
		if (i == 0 || !wordByte(text[i-1])) && (j == len(text) || !wordByte(text[j])) {
			return true
		}
		off = i + 1
	}
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// BareLines counts the items of a summary that state nothing but a name (one word that is a
// fact, see Facts), and the items (list lines: "- …", "* …") that count at all; text quoted inside an item (its indented
// continuation lines), headings and free text are not items. "- lib.rs" or "- `build_filter`"
// is bare; "- src/lib.rs: edited parse_args" says what was done. A dump of identifiers is all
// bare items; a summary that tells the next turn what each name is has few.
func BareLines(summary string) (bare, items int) {
	for _, l := range strings.Split(summary, "\n") {
		if strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") {
			continue // quoted inside an item
		}
		l = strings.TrimSpace(l)
		item, ok := strings.CutPrefix(l, "- ")
		if !ok {
			item, ok = strings.CutPrefix(l, "* ")
		}
		if !ok {
			continue
		}
		items++
		item = strings.Trim(strings.TrimSpace(item), "`\"'")
		if item == "" || strings.ContainsAny(item, " \t") {
			continue
		}
		if f := Facts(item); len(f) == 1 && f[0].Text == strings.TrimRight(item, ".,:;") {
			bare++ // one word, and a name: nothing said about it
		}
	}
	return bare, items
}

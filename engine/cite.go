package engine

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
)

// Citations say which messages a line of a summary came from, in a form an agent reads and a
// program parses: "[m12]" for one message, "[m12–18]" for a range, both ends included,
// indexes counted from 0 in the conversation the summary's source marker names (the messages
// Compact received, which Expand returns). A line carried from an earlier summary cites that
// summary's source, qualified by the first SourcePrefixLen hex digits of its hash:
// "[s1a2b3c4d m12–18]". This file is the one place that writes and reads them.

// SourcePrefixLen is how many hex digits of a source hash qualify a citation.
const SourcePrefixLen = 8

// CitationLegend is the line a summary with citations states once, saying what they mean.
const CitationLegend = "Sources: [mN] is message N (0-based) of the conversation this summary replaced, [sXXXXXXXX mN] of an earlier one by its source hash prefix; Expand returns them."

// Citation names messages of a source: Source is the hash prefix of an earlier source ("" for
// the source of the summary that holds it), Range the messages.
type Citation struct {
	Source string
	Range  SourceRange
}

// String writes c: "[m12]", "[m12–18]", "[s1a2b3c4d m12–18]".
func (c Citation) String() string {
	var b strings.Builder
	b.WriteByte('[')
	if c.Source != "" {
		b.WriteString("s")
		b.WriteString(c.Source)
		b.WriteByte(' ')
	}
	b.WriteString("m")
	b.WriteString(strconv.Itoa(c.Range.First))
	if c.Range.Last != c.Range.First {
		b.WriteString("–")
		b.WriteString(strconv.Itoa(c.Range.Last))
	}
	b.WriteByte(']')
	return b.String()
}

// Cite is the citation of messages first to last of the summary's own source.
func Cite(first, last int) string {
	return Citation{Range: SourceRange{First: min(first, last), Last: max(first, last)}}.String()
}

// Qualified returns c as cited from a later summary: a citation of the summary's own source
// gets the prefix of hash, that source's hash; one already qualified stays as it is.
func (c Citation) Qualified(hash string) Citation {
	if c.Source == "" && len(hash) >= SourcePrefixLen {
		c.Source = strings.ToLower(hash[:SourcePrefixLen])
	}
	return c
}

// citationRE matches a citation as String writes it, a hyphen or "m" before the last index
// also accepted.
var citationRE = regexp.MustCompile(`\[(?:s([0-9a-f]{` + strconv.Itoa(SourcePrefixLen) + `,64}) )?m(\d{1,9})(?:\s*[–-]\s*m?(\d{1,9}))?\]`)

// ParseCitations returns the citations in text, in order; a range whose first index exceeds
// its last is not one.
func ParseCitations(text string) []Citation {
	var out []Citation
	for _, m := range citationRE.FindAllStringSubmatch(text, -1) {
		if c, ok := citationOf(m); ok {
			out = append(out, c)
		}
	}
	return out
}

func citationOf(m []string) (Citation, bool) {
	first, _ := strconv.Atoi(m[2]) // at most 9 digits
	last := first
	if m[3] != "" {
		last, _ = strconv.Atoi(m[3])
	}
	if last < first {
		return Citation{}, false
	}
	return Citation{Source: m[1], Range: SourceRange{First: first, Last: last}}, true
}

// ParseCitation reads one citation: as String writes it ("[s1a2b3c4d m12–18]"), its brackets
// left out or not (as a client passes on what a model copied), or an unqualified range in
// any form ParseRange reads ("m12–m18", "12-18").
func ParseCitation(s string) (Citation, error) {
	s = strings.TrimSpace(s)
	b := s
	if !strings.HasPrefix(b, "[") {
		b = "[" + b + "]"
	}
	if m := citationRE.FindStringSubmatch(b); m != nil && m[0] == b {
		if c, ok := citationOf(m); ok {
			return c, nil
		}
		return Citation{}, errors.New("the first index exceeds the last")
	}
	r, err := ParseRange(s)
	return Citation{Range: r}, err
}

// CutCitations splits the citations that end line from the rest of it: "- edited a.go
// [m3] [s1a2b3c4d m1–2]" gives "- edited a.go" and both citations.
func CutCitations(line string) (string, []Citation) {
	rest := strings.TrimRight(line, " ")
	var out []Citation
	for strings.HasSuffix(rest, "]") {
		i := strings.LastIndexByte(rest, '[')
		if i < 0 {
			break
		}
		m := citationRE.FindStringSubmatch(rest[i:])
		if m == nil || m[0] != rest[i:] {
			break
		}
		c, ok := citationOf(m)
		if !ok {
			break
		}
		out = append([]Citation{c}, out...)
		rest = strings.TrimRight(rest[:i], " ")
	}
	return rest, out
}

// QualifyCitations returns text with each citation of its own source qualified by hash (see
// Citation.Qualified): the text of a summary about to be built on, whose citations then keep
// naming the messages they named.
func QualifyCitations(text, hash string) string {
	if len(hash) < SourcePrefixLen || !strings.Contains(text, "[m") {
		return text
	}
	return citationRE.ReplaceAllStringFunc(text, func(s string) string {
		c, ok := citationOf(citationRE.FindStringSubmatch(s))
		if !ok {
			return s
		}
		return c.Qualified(hash).String()
	})
}

// WithoutCitations returns text with its citations taken out.
func WithoutCitations(text string) string { return citationRE.ReplaceAllString(text, "") }

// citeAsk is what the summary prompt asks of citations.
const citeAsk = "\nEnd every line of the summary with the messages it came from, as the transcript numbers them: [m12] for one message, [m12–18] for a range. Lines carried from the previous summary keep their citations as they are. State once, as the summary's first line: " + CitationLegend + "\n"

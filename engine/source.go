package engine

import (
	"errors"
	"regexp"
	"strconv"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// A compaction's source is the conversation as Compact received it, kept (by the service)
// under the prefix hash of all its messages. The summary message names it on a line of its
// own, the source marker, which a host persisting only provider bodies keeps with the text,
// and which a program finds again with ParseSourceMarker.

// SourceRange is a range of messages of a source, by their index in it, both ends included.
type SourceRange struct{ First, Last int }

// String writes r as a citation: "m12–m18", or "m12" for one message.
func (r SourceRange) String() string {
	if r.First == r.Last {
		return "m" + strconv.Itoa(r.First)
	}
	return "m" + strconv.Itoa(r.First) + "–m" + strconv.Itoa(r.Last)
}

// sourceMarkerOpen starts every source marker.
const sourceMarkerOpen = "[compactord source "

// SourceMarker is the line naming the source a summary stands for: the source's hash (64 hex
// digits) and the range r of its messages the summary covers.
func SourceMarker(hash string, r SourceRange) string {
	return sourceMarkerOpen + hash + " " + r.String() + ": the original messages, for Expand]"
}

// sourceMarker matches a source marker; the last one in a text is the newest.
var sourceMarker = regexp.MustCompile(`\[compactord source ([0-9a-f]{64}) (m\d{1,9}(?:[–-]m\d{1,9})?)[:\]]`)

// ParseSourceMarker returns the hash and range of the last source marker in text.
func ParseSourceMarker(text string) (hash string, r SourceRange, ok bool) {
	if !strings.Contains(text, sourceMarkerOpen) {
		return "", SourceRange{}, false
	}
	all := sourceMarker.FindAllStringSubmatch(text, -1)
	if len(all) == 0 {
		return "", SourceRange{}, false
	}
	m := all[len(all)-1]
	r, err := ParseRange(m[2])
	if err != nil {
		return "", SourceRange{}, false
	}
	return m[1], r, true
}

// ErrRange is what ParseRange's errors wrap.
var ErrRange = errors.New("not a message range")

// citation is a range as summaries cite it ("[m12–m18]", "m12-m18", "m12") or as numbers
// ("12-18", "12").
var citation = regexp.MustCompile(`^\[?m?(\d{1,9})(?:\s*(?:–|-|—|\.\.)\s*m?(\d{1,9}))?\]?$`)

// ParseRange reads a range of message indexes written as a citation ("m12–m18", "[m12-m18]",
// "m12") or as numbers ("12-18"); the first index may not exceed the last.
func ParseRange(s string) (SourceRange, error) {
	m := citation.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return SourceRange{}, ErrRange
	}
	first, _ := strconv.Atoi(m[1]) // at most 9 digits
	last := first
	if m[2] != "" {
		last, _ = strconv.Atoi(m[2])
	}
	if last < first {
		return SourceRange{}, errors.New("the first index exceeds the last")
	}
	return SourceRange{First: first, Last: last}, nil
}

// WithSourceMarker returns the text of a summary message with marker on a line of its own
// at its end.
func WithSourceMarker(text, marker string) string { return text + "\n" + marker }

// PrefixHash returns h[len(msgs)] of the prefix hash chain (see Decision.PrefixChain): the
// hash of the whole conversation, ids and token counts aside, from c's memo where it can.
// msgs must have passed Limits.Validate.
func (c *Counter) PrefixHash(msgs []*compactorv1.Message) [32]byte {
	return c.chain.at(&c.keys, msgs, make([]contentKey, len(msgs)), len(msgs))
}

// OutputSource is how the marker of a pruned tool output, or the note of a cut one, names
// where the full output is: message i of source hash (for Expand, or a recall_context
// citation).
func OutputSource(hash string, i int) string {
	return outputSourceOpen + hash + " m" + strconv.Itoa(i) + ", for Expand"
}

// outputSourceOpen starts OutputSource; outputSource reads it back.
const outputSourceOpen = "full output in compactord source "

var outputSource = regexp.MustCompile(outputSourceOpen + `([0-9a-f]{64}) m(\d{1,9}), for Expand`)

// ParseOutputSource returns the source hash and message index an OutputSource in text names
// (the first one).
func ParseOutputSource(text string) (hash string, i int, ok bool) {
	if !strings.Contains(text, outputSourceOpen) {
		return "", 0, false
	}
	m := outputSource.FindStringSubmatch(text)
	if m == nil {
		return "", 0, false
	}
	i, err := strconv.Atoi(m[2]) // at most 9 digits
	return m[1], i, err == nil
}

// keepSource sets the source the plan's markers name (Options.Source) for a conversation of n
// messages: refTokens, the most tokens the reference to it adds to a marker, as a bracket of
// its own after a pruned output's marker (outputRef), counted at the largest index of as many
// digits as the last one (a BPE tokenizer splits the index from the words around it, and the
// approx count grows with the length), which also bounds what it adds to a cut note over "the
// full output is gone"; and markerTokens, what the summary's source marker takes at most
// (sourceMarkerTokens).
func (p *policy) keepSource(hash string, n int) error {
	tc, err := tokenizer.New(p.tokenizer)
	if err != nil {
		return err
	}
	p.source, p.sourceMessages = hash, n
	p.refTokens = tc.Count(outputRef(hash, widestIndex(n)))
	p.markerTokens = sourceMarkerTokens(tc)
	return nil
}

// exactMarkerTokens is what this source's own marker takes, for the indexes of its messages:
// where the bound (sourceMarkerTokens) does not fit (see deciding.withMarker).
func (p *policy) exactMarkerTokens() int64 {
	tc, err := tokenizer.New(p.tokenizer)
	if err != nil { // keepSource made one
		return p.markerTokens
	}
	w := widestIndex(p.sourceMessages)
	return MessageOverheadTokens + tc.Count(SourceMarker(p.source, SourceRange{First: w - 1, Last: w}))
}

// widestIndex is the largest index of as many digits as n−1, the last index of n messages.
func widestIndex(n int) int {
	w := 9
	for k := 10; k <= n; k *= 10 {
		w = w*10 + 9
	}
	return w
}

// sourceMarkerTokens bounds the tokens the source marker (SourceMarker, WithSourceMarker) adds
// to a summary message under tc, which the plan reserves in the summary room when the
// compaction keeps a source (Options.Source): the marker counted as a message of its own (its
// framing outweighs the line break that joins it to the summary's text), for a range of the
// widest indexes a marker names (nine digits: ParseSourceMarker reads no more), its hash at
// one token a hex digit, the most it can take. It depends on the tokenizer only, so every
// compaction of a prefix reserves the same, whatever follows the cut (a preparation and the
// compaction at the trigger share one summary).
func sourceMarkerTokens(tc tokenizer.Text) int64 {
	const widest = 999_999_999
	return MessageOverheadTokens + tc.Count(SourceMarker("", SourceRange{First: widest - 1, Last: widest})) + markerHashTokens
}

// markerHashTokens bounds the tokens of a source hash in a marker: 64 hex digits, at most one
// token each.
const markerHashTokens = 64

// outputRef is what a pruned output's marker is followed by when its source is kept.
func outputRef(hash string, i int) string { return " [" + OutputSource(hash, i) + "]" }

package summarize

import "strings"

// What the agent carried on: a value is worth keeping when the agent went on working with it.
// A word counts as carried after an event when, later, the agent wrote it having seen it in
// an output (a tool's or an earlier summary's: a value it took from a result), or passed it
// to a call having seen it in the user's words (a value the user gave). Words are taken as
// they are written (runs of letters, digits and the bytes paths and code names hold),
// whatever their shape; the agent's own prose repeating itself is not carrying a value, and
// a word most of the range repeats is its vocabulary.

// Bounds on a word, in bytes.
const (
	wordMinBytes = 3
	wordMaxBytes = 120
)

// commonShare: a word in more than this share of the range's events (and more than
// commonMin of them) is the range's vocabulary, not a value anyone carried; so are the
// function words of English prose (proseWords).
const (
	commonShare = 0.25
	commonMin   = 6
)

// proseWords are short words of English prose that any text repeats.
var proseWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields("the and for not but you are was has had can its all any now one out see use way who why how get set yes let will that this with from have then than when what into also just been were there their which would should could these those them they your here some more most only other such each very make does done like need next file line lines code run test") {
		m[w] = true
	}
	return m
}()

// eachWord calls f with every word of text, in order, repeats included.
func eachWord(text string, f func(w string)) {
	for i := 0; i < len(text); {
		if !wordByte(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && wordByte(text[j]) {
			j++
		}
		w := strings.TrimRight(text[i:j], ".-/")
		i = j
		if len(w) >= wordMinBytes && len(w) <= wordMaxBytes {
			f(w)
		}
	}
}

// wordByte reports whether c may be part of a word.
func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '.' || c == '/' || c == '-' || c == '~' || c == '@'
}

// Where a word was seen.
type wordSource uint8

const (
	fromOutput    wordSource = iota // a tool output, an observation, an earlier summary
	fromUser                        // the user's words
	fromAgentText                   // the agent's text
	fromAgentCall                   // the arguments of the agent's calls and its commands
)

// usage records, for each word of a range, where it was first seen and when the agent
// carried it on.
type usage struct {
	events  int
	df      map[string]int   // word → events that held it
	output  map[string]int   // word → the first output event that held it
	user    map[string]int   // word → the first user event that held it
	carries map[string][]int // word → the agent's events that carried it on (see above), ascending
}

// note records the words of text, an event at seq from src.
func (u *usage) note(text string, seq int, src wordSource) {
	if u.df == nil {
		u.df, u.output, u.user, u.carries = map[string]int{}, map[string]int{}, map[string]int{}, map[string][]int{}
	}
	u.events++
	seen := map[string]bool{}
	eachWord(text, func(w string) {
		if seen[w] {
			return
		}
		seen[w] = true
		u.df[w]++
		_, out := u.output[w]
		_, usr := u.user[w]
		switch src {
		case fromOutput:
			if !out {
				u.output[w] = seq
			}
		case fromUser:
			if !usr {
				u.user[w] = seq
			}
		case fromAgentText, fromAgentCall:
			if out || usr && src == fromAgentCall {
				u.carries[w] = append(u.carries[w], seq)
			}
		}
	})
}

// carried reports whether the agent carried w on after seq and w is not the range's common
// vocabulary.
func (u *usage) carried(w string, seq int) bool {
	s := u.carries[w]
	if len(s) == 0 || s[len(s)-1] <= seq || proseWords[strings.ToLower(w)] {
		return false
	}
	return u.df[w] <= max(commonMin, int(commonShare*float64(u.events)))
}

// carriedWords returns the distinct words of text the agent carried on after seq, in order.
func (u *usage) carriedWords(text string, seq int) []string {
	var out []string
	seen := map[string]bool{}
	eachWord(text, func(w string) {
		if !seen[w] && u.carried(w, seq) {
			seen[w] = true
			out = append(out, w)
		}
	})
	return out
}

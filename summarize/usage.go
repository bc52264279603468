package summarize

import "strings"

// What the agent carried on: a value an output showed or a request gave is worth keeping
// when the agent itself wrote it again later (in its text or its calls' arguments), because
// it went on working with it. Words are taken as they are written (runs of letters, digits
// and the bytes paths and code names hold), whatever their shape; a word most of the range
// repeats ("file", "the") tells nothing and is not counted.

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

// usage records, for each word of a range, the events that held it and when the agent wrote
// it.
type usage struct {
	events int
	df     map[string]int   // word → events that held it
	agent  map[string][]int // word → the seqs the agent wrote it at, ascending
}

// note records the words of text, an event at seq; agent says the agent wrote it.
func (u *usage) note(text string, seq int, agent bool) {
	if u.df == nil {
		u.df, u.agent = map[string]int{}, map[string][]int{}
	}
	u.events++
	seen := map[string]bool{}
	eachWord(text, func(w string) {
		if seen[w] {
			return
		}
		seen[w] = true
		u.df[w]++
		if agent {
			u.agent[w] = append(u.agent[w], seq)
		}
	})
}

// carried reports whether the agent wrote w after seq and w is not the range's common
// vocabulary.
func (u *usage) carried(w string, seq int) bool {
	s := u.agent[w]
	if len(s) == 0 || s[len(s)-1] <= seq {
		return false
	}
	return !proseWords[strings.ToLower(w)] && u.df[w] <= max(commonMin, int(commonShare*float64(u.events)))
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

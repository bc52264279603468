package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// This file is tiktoken's pre-tokenizer without a regular-expression engine: for each of the
// two patterns below, a scanner that returns the same pieces as regexp2 (which tiktoken-go
// matches them with) finds, at a fraction of the cost. regexp2 is a backtracking matcher, so
// a match is the first success in backtracking order: alternatives are tried left to right,
// greedy quantifiers try their longest run first and give back one rune at a time. Each
// scanner reproduces that order, alternative by alternative; pretok_test.go checks them
// against regexp2 rune class by rune class, and piece by piece on the corpus and by fuzzing.
//
// Every rune of a text starts a match of either pattern (a letter, a number, whitespace or
// any other rune each has an alternative of its own), so the pieces tile the text: each
// match starts where the one before it ended.

// Pre-tokenizer patterns: OpenAI's published patterns, as tiktoken-go writes them for
// regexp2 (which has the lookahead the last alternatives need) and compiles them, with
// regexp2.None. The scanners o200kPiece and cl100kPiece reproduce them; the tests use them
// as the oracle.
const (
	o200kPattern = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
		`|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
		`|\p{N}{1,3}` +
		`| ?[^\s\p{L}\p{N}]+[\r\n/]*` +
		`|\s*[\r\n]+` +
		`|\s+(?!\S)` +
		`|\s+`
	cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// runeClass is the set of the patterns' character classes a rune belongs to, as bits.
// A rune in none of classLetter, classNumber and classSpace is in [^\s\p{L}\p{N}].
type runeClass uint8

const (
	classLetter  runeClass = 1 << iota // \p{L}
	classNumber                        // \p{N}
	classSpace                         // \s: unicode.IsSpace, as regexp2 reads it outside ECMAScript and RE2 modes
	classNewline                       // [\r\n]
	classUpper                         // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], o200k's leading class
	classLower                         // [\p{Ll}\p{Lm}\p{Lo}\p{M}], o200k's trailing class
)

// asciiClasses is classify for each ASCII rune, so that the scanners look most text up
// byte by byte without decoding it.
var asciiClasses = func() (t [utf8.RuneSelf]runeClass) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = classifyRune(r)
	}
	return t
}()

// classifyRune returns the classes of r, from the tables of Go's unicode package, which are
// the tables regexp2 looks categories up in.
func classifyRune(r rune) runeClass {
	switch {
	case unicode.IsLetter(r):
		switch {
		case unicode.IsLower(r): // Ll
			return classLetter | classLower
		case unicode.IsUpper(r), unicode.IsTitle(r): // Lu, Lt
			return classLetter | classUpper
		default: // Lm, Lo: in both of o200k's case classes
			return classLetter | classUpper | classLower
		}
	case unicode.IsMark(r): // not a letter, yet in both of o200k's case classes
		return classUpper | classLower
	case unicode.IsNumber(r):
		return classNumber
	case r == '\r' || r == '\n':
		return classSpace | classNewline
	case unicode.IsSpace(r):
		return classSpace
	}
	return 0
}

// classAt returns the classes of the rune at byte offset i of s, which must be valid UTF-8,
// and the rune's length in bytes.
func classAt(s string, i int) (runeClass, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClasses[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return classifyRune(r), w
}

// isOther reports whether c is the class of a rune in [^\s\p{L}\p{N}].
func isOther(c runeClass) bool { return c&(classLetter|classNumber|classSpace) == 0 }

// isPrefix reports whether c is the class of a rune in [^\r\n\p{L}\p{N}], the optional rune
// before a word.
func isPrefix(c runeClass) bool { return c&(classLetter|classNumber|classNewline) == 0 }

// foldsTo reports whether the rune starting at byte offset i of s matches the lower-case
// ASCII letter lower case-insensitively, as regexp2 matches it: when unicode.ToLower of the
// rune is lower. Apart from the ASCII letters, only U+0130 and U+212A lower-case to ASCII
// (to i and k, which no contraction has), so the first byte decides: a byte of a multi-byte
// rune is at least 0x80, and stays so with bit 0x20 set.
func foldsTo(s string, i int, lower byte) bool { return s[i]|0x20 == lower }

// contractionEnd returns the end of (?i:'s|'t|'re|'ve|'m|'ll|'d) matched at byte offset i
// of s, or i when it does not match there.
func contractionEnd(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return i
	}
	switch {
	case foldsTo(s, i+1, 's'), foldsTo(s, i+1, 't'), foldsTo(s, i+1, 'm'), foldsTo(s, i+1, 'd'):
		return i + 2
	case i+2 >= len(s):
		return i
	case foldsTo(s, i+1, 'r') && foldsTo(s, i+2, 'e'),
		foldsTo(s, i+1, 'v') && foldsTo(s, i+2, 'e'),
		foldsTo(s, i+1, 'l') && foldsTo(s, i+2, 'l'):
		return i + 3
	}
	return i
}

// runEnd returns the end of the longest run of runes from byte offset i of s that are all
// in one of the classes of want.
func runEnd(s string, i int, want runeClass) int {
	for i < len(s) {
		c, w := classAt(s, i)
		if c&want == 0 {
			break
		}
		i += w
	}
	return i
}

// numberEnd returns the end of \p{N}{1,3} at byte offset i of s, where a number must start.
func numberEnd(s string, i int) int {
	for n := 0; n < 3 && i < len(s); n++ {
		c, w := classAt(s, i)
		if c&classNumber == 0 {
			break
		}
		i += w
	}
	return i
}

// otherEnd returns the end of ` ?[^\s\p{L}\p{N}]+[\r\n]*` (with slash, o200k's
// ` ?[^\s\p{L}\p{N}]+[\r\n/]*`) at byte offset i of s, or -1 when it does not match there.
// The optional space is tried first; without it the space itself is not in the class, so a
// space not followed by such a rune does not match at all. Each part takes its longest run,
// as what follows always matches.
func otherEnd(s string, i int, slash bool) int {
	j := i
	if s[j] == ' ' {
		j++
	}
	start := j
	for j < len(s) {
		c, w := classAt(s, j)
		if !isOther(c) {
			break
		}
		j += w
	}
	if j == start {
		return -1
	}
	for j < len(s) && (s[j] == '\r' || s[j] == '\n' || slash && s[j] == '/') {
		j++
	}
	return j
}

// spaceEnd returns the end of the piece at byte offset i of s, where a whitespace rune is,
// when no earlier alternative matched there: the first of these that matches.
//
//   - \s*[\r\n]+: \s* takes the whole whitespace run, then gives runes back until [\r\n]+
//     matches, so the piece ends after the run's last \r or \n.
//   - \s+(?!\S): the whole run, when the text ends after it; else the run gives back its last
//     rune (whitespace, so not \S) when the run is longer than one rune.
//   - \s+: the whole run, a single rune followed by a non-space.
func spaceEnd(s string, i int) int {
	end, lastNewlineEnd, lastStart := i, -1, i
	for end < len(s) {
		c, w := classAt(s, end)
		if c&classSpace == 0 {
			break
		}
		if c&classNewline != 0 {
			lastNewlineEnd = end + w
		}
		lastStart = end
		end += w
	}
	switch {
	case lastNewlineEnd >= 0:
		return lastNewlineEnd
	case end == len(s):
		return end
	case lastStart > i:
		return lastStart
	}
	return end
}

// o200kWordLowerEnd returns the end of
//
//	[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//
// at byte offset i of s, or -1 when it does not match there. The leading class takes its
// longest run; if a trailing-class rune follows the run, the trailing class takes its own
// longest run from there. Else the leading class gives runes back until the trailing class
// matches one: at the run's last rune that is in both classes (\p{Lm}, \p{Lo}, \p{M}), after
// which only \p{Lu} and \p{Lt} runes, not in the trailing class, are left to give back.
func o200kWordLowerEnd(s string, i int) int {
	lastLowerEnd := -1
	for j := i; j < len(s); {
		c, w := classAt(s, j)
		if c&classUpper == 0 {
			if c&classLower != 0 {
				return contractionEnd(s, runEnd(s, j, classLower))
			}
			break
		}
		j += w
		if c&classLower != 0 {
			lastLowerEnd = j
		}
	}
	if lastLowerEnd < 0 {
		return -1
	}
	return contractionEnd(s, lastLowerEnd)
}

// o200kWordUpperEnd returns the end of
//
//	[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//
// at byte offset i of s, or -1 when it does not match there: each class takes its longest
// run, as what follows always matches.
func o200kWordUpperEnd(s string, i int) int {
	j := runEnd(s, i, classUpper)
	if j == i {
		return -1
	}
	return contractionEnd(s, runEnd(s, j, classLower))
}

// o200kPiece returns the end of the match of o200kPattern that starts at byte offset i of
// s, which must be valid UTF-8 with i < len(s). Each word alternative is tried with its
// optional [^\r\n\p{L}\p{N}] rune first, then without, before the next alternative.
func o200kPiece(s string, i int) int {
	c, w := classAt(s, i)
	prefixed := isPrefix(c) && i+w < len(s)
	if prefixed {
		if end := o200kWordLowerEnd(s, i+w); end >= 0 {
			return end
		}
	}
	// Without the prefix, a mark (not a letter, so also a prefix) can start a word.
	if c&(classUpper|classLower) != 0 {
		if end := o200kWordLowerEnd(s, i); end >= 0 {
			return end
		}
	}
	if prefixed {
		if end := o200kWordUpperEnd(s, i+w); end >= 0 {
			return end
		}
	}
	if c&classUpper != 0 {
		return o200kWordUpperEnd(s, i)
	}
	if c&classNumber != 0 {
		return numberEnd(s, i)
	}
	if end := otherEnd(s, i, true); end >= 0 {
		return end
	}
	return spaceEnd(s, i)
}

// cl100kPiece returns the end of the match of cl100kPattern that starts at byte offset i of
// s, which must be valid UTF-8 with i < len(s).
func cl100kPiece(s string, i int) int {
	if end := contractionEnd(s, i); end > i {
		return end
	}
	c, w := classAt(s, i)
	// [^\r\n\p{L}\p{N}]?\p{L}+, with the optional rune first.
	if isPrefix(c) && i+w < len(s) {
		if next, _ := classAt(s, i+w); next&classLetter != 0 {
			return runEnd(s, i+w, classLetter)
		}
	}
	if c&classLetter != 0 {
		return runEnd(s, i, classLetter)
	}
	if c&classNumber != 0 {
		return numberEnd(s, i)
	}
	if end := otherEnd(s, i, false); end >= 0 {
		return end
	}
	return spaceEnd(s, i)
}

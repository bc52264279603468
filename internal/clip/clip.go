// Package clip bounds strings by their first bytes, never splitting a UTF-8 sequence: the
// one prefix cutter. String and Quote bound the strings that reach an error or a log line
// from outside the process (request fields, header values, provider answers): a few hundred
// bytes at most, with the length of what was cut, so that no caller can make a log line or a
// status message as large as its request. Prefix bounds the text a summary quotes.
package clip

import (
	"strconv"
	"unicode/utf8"
)

// Max is the most bytes of a string that String and Quote keep.
const Max = 256

// String returns s when it has at most max bytes, else its first max bytes (never splitting
// a UTF-8 sequence) followed by "… (N bytes)", N being the length of s.
func String(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return s[:cut(s, max)] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// Prefix returns s when it has at most max bytes, else its first max bytes (never splitting
// a UTF-8 sequence) followed by "…".
func Prefix(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return s[:cut(s, max)] + "…"
}

// cut is the largest length ≤ max at which s can be cut without splitting a UTF-8 sequence.
func cut(s string, max int) int {
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return max
}

// Quote is strconv.Quote of s, its first Max bytes only when it is longer, followed then by
// "… (N bytes)".
func Quote(s string) string {
	if len(s) <= Max {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:cut(s, Max)]) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

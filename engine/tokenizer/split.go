package tokenizer

// SplitsAt reports whether the tokens of text split at byte offset i: for every a < i < b,
// the tokens of text[a:b] are those of text[a:i] followed by those of text[i:b], so that
// their counts add up. It holds, under o200k_base and cl100k_base, where a line feed is
// followed by a printable ASCII rune other than a space or a slash: every pre-tokenizer
// piece that reaches the line feed ends after it (a run of whitespace ends at its last line
// break, punctuation takes the line breaks and slashes after it, and no word or number
// starts with a line feed), none reads past the rune that follows, and the piece that starts
// there depends only on the text from there on. It never holds under approx, whose count
// is not a sum. It reads text[i−1] and text[i] only; i must be within the text.
func (t Text) SplitsAt(text string, i int) bool {
	if t.enc == nil || i <= 0 || i >= len(text) || text[i-1] != '\n' {
		return false
	}
	c := text[i]
	return c > ' ' && c < 0x7f && c != '/'
}

package engine

import (
	"sort"
	"strings"

	"github.com/compactord/compactord/engine/tokenizer"
)

// Counting what a cut keeps: cutTexts counts the head and the tail it would keep of a tool
// output, and a plan tries several cuts of the same outputs (one per shape it weighs), whose
// heads and tails differ by a few bytes. textCounts splits a text into chunks at the points
// where its tokens split (tokenizer.Text.SplitsAt), counts each chunk once, when a head or
// a tail first holds it, and counts only the partial chunk at the edge of each later head
// or tail. The counts are exactly the tokenizer's.

// chunkBytes is about the size of a chunk: the most a head or a tail counts again.
const chunkBytes = 4096

// textCounts counts the prefixes and suffixes of one text.
type textCounts struct {
	s      string
	starts []int   // chunk starts: 0, then split points at least chunkBytes apart
	counts []int64 // each chunk's tokens, −1 until counted
}

// newTextCounts returns the counts of s under tc, none counted yet.
func newTextCounts(s string, tc tokenizer.Text) *textCounts {
	c := &textCounts{s: s, starts: []int{0}}
	for i := chunkBytes; i < len(s); {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			break
		}
		i += j + 1
		if tc.SplitsAt(s, i) {
			c.starts = append(c.starts, i)
			i += chunkBytes
		}
	}
	c.counts = make([]int64, len(c.starts))
	for k := range c.counts {
		c.counts[k] = -1
	}
	return c
}

// chunk returns the tokens of chunk k.
func (c *textCounts) chunk(k int, tc tokenizer.Text) int64 {
	if c.counts[k] < 0 {
		end := len(c.s)
		if k+1 < len(c.starts) {
			end = c.starts[k+1]
		}
		c.counts[k] = tc.Count(c.s[c.starts[k]:end])
	}
	return c.counts[k]
}

// prefix returns the tokens of s[:h].
func (c *textCounts) prefix(h int, tc tokenizer.Text) int64 {
	// The chunks wholly before h, then what is left up to h.
	k := sort.SearchInts(c.starts, h+1) - 1 // the last start ≤ h
	var n int64
	for j := range k {
		n += c.chunk(j, tc)
	}
	return n + tc.Count(c.s[c.starts[k]:h])
}

// suffix returns the tokens of s[t:].
func (c *textCounts) suffix(t int, tc tokenizer.Text) int64 {
	k := sort.SearchInts(c.starts, t) // the first start ≥ t
	if k == len(c.starts) {
		return tc.Count(c.s[t:])
	}
	n := tc.Count(c.s[t:c.starts[k]])
	for j := k; j < len(c.starts); j++ {
		n += c.chunk(j, tc)
	}
	return n
}

package tokenizer

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"strings"
	"unicode/utf8"

	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// This file is tiktoken's byte-pair encoder, producing the same token ids as tiktoken-go's
// EncodeOrdinary, with tables the garbage collector need not scan: the merge ranks live in
// one byte arena and one open-addressed table of integers, instead of about 300,000 strings
// in maps and slices that every GC cycle would mark.

// bpeEncodings are the tiktoken encodings compactord counts with, by ID: the key
// under which tiktoken-go-loader's offline loader finds the merge ranks, and the
// pre-tokenizer (pretok.go).
var bpeEncodings = [...]struct {
	url   string
	piece pieceFunc
}{
	O200k:  {"https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken", o200kPiece},
	Cl100k: {"https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken", cl100kPiece},
}

// loadEncoder builds the encoder of a tiktoken encoding (O200k or Cl100k) from the tables
// embedded in tiktoken-go-loader. It takes a few hundred milliseconds; the loader's map is
// garbage when it returns.
func loadEncoder(id ID) (*Encoder, error) {
	if int(id) >= len(bpeEncodings) {
		return nil, fmt.Errorf("no BPE tables for tokenizer %d", id)
	}
	spec := bpeEncodings[id]
	ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(spec.url)
	if err != nil {
		return nil, fmt.Errorf("read merge ranks: %w", err)
	}
	return newBPE(ranks, spec.piece)
}

// Encoder is a byte-pair encoder: a pre-tokenizer that splits text into pieces and a rank table
// that merges each piece's bytes into tokens. It is read-only once built and safe for
// concurrent use.
type Encoder struct {
	piece pieceFunc
	ranks rankTable
}

// pieceFunc is a pre-tokenizer: it returns the end of the piece that starts at byte offset
// i of s, which is valid UTF-8, with i < len(s). The end is greater than i.
type pieceFunc func(s string, i int) int

// newBPE returns an encoder whose tokens are the keys of ranks (token bytes → id, also the
// merge priority: lower merges first) and whose pieces are those of piece. It keeps no
// reference to ranks.
func newBPE(ranks map[string]int, piece pieceFunc) (*Encoder, error) {
	t, err := newRankTable(ranks)
	if err != nil {
		return nil, err
	}
	return &Encoder{piece: piece, ranks: t}, nil
}

// Count returns the number of tokens of s: len(e.Encode(s)), without building the ids. It
// does not allocate for valid UTF-8 text whose pieces are at most bpeSmall bytes long.
func (e *Encoder) Count(s string) int {
	n := 0
	e.eachPiece(s, func(piece string) { n += e.ranks.countPiece(piece) })
	return n
}

// Encode returns the token ids of s, the same as tiktoken-go's EncodeOrdinary: special-token
// text such as "<|endoftext|>" is ordinary text, and each byte of s that is not part of valid
// UTF-8 is read as U+FFFD. The result is never nil.
func (e *Encoder) Encode(s string) []int {
	ids := make([]int, 0, len(s)/4+1)
	e.eachPiece(s, func(piece string) { ids = e.ranks.appendPiece(ids, piece) })
	return ids
}

// eachPiece calls f with each piece of s, in order; the pieces tile s. Like tiktoken-go,
// which matches and slices the text as []rune, it reads every byte of s that is not part of
// valid UTF-8 as U+FFFD, whose three bytes are then what the pieces hold.
func (e *Encoder) eachPiece(s string, f func(piece string)) {
	if !utf8.ValidString(s) {
		s = replaceInvalidUTF8(s)
	}
	for i := 0; i < len(s); {
		end := e.piece(s, i)
		f(s[i:end])
		i = end
	}
}

// replaceInvalidUTF8 returns s with each byte that is not part of valid UTF-8 replaced by
// U+FFFD: what string([]rune(s)) returns (strings.ToValidUTF8 would replace a run of such
// bytes with one U+FFFD).
func replaceInvalidUTF8(s string) string {
	var sb strings.Builder
	sb.Grow(len(s) + len(s)/2)
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			sb.WriteByte(s[i])
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 {
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.WriteString(s[i : i+w])
		}
		i += w
	}
	return sb.String()
}

// noRank marks a span of bytes that is not a token.
const noRank = math.MaxUint32

// rankTable maps token bytes to ranks. Its memory is two pointer-free arrays, so the garbage
// collector never scans it: bytes holds every token's bytes, and slots is an open-addressed
// hash table (linear probing, at most half full) of offsets into bytes.
type rankTable struct {
	seed   maphash.Seed
	bytes  []byte
	slots  []rankSlot // len is a power of two
	mask   uint64     // len(slots) - 1
	maxLen int        // of the longest token
}

// rankSlot is one token in a rankTable; n == 0 marks an empty slot.
type rankSlot struct {
	off  uint32 // of the token's bytes in rankTable.bytes
	rank uint32
	n    uint16 // length of the token in bytes
	tag  uint16 // the top bits of the token's hash, to skip most mismatches without comparing bytes
}

func newRankTable(ranks map[string]int) (rankTable, error) {
	if len(ranks) == 0 {
		return rankTable{}, errors.New("build rank table: no tokens")
	}
	var total, maxLen int
	for tok, r := range ranks {
		if tok == "" || len(tok) > math.MaxUint16 {
			return rankTable{}, fmt.Errorf("build rank table: token of %d bytes", len(tok))
		}
		if r < 0 || int64(r) >= noRank {
			return rankTable{}, fmt.Errorf("build rank table: token %q has rank %d", tok, r)
		}
		total += len(tok)
		maxLen = max(maxLen, len(tok))
	}
	if total > math.MaxUint32 {
		return rankTable{}, fmt.Errorf("build rank table: %d bytes of tokens", total)
	}
	size := 1 << bits.Len(uint(2*len(ranks)-1)) // ≥ 2 × tokens
	t := rankTable{
		seed:   maphash.MakeSeed(),
		bytes:  make([]byte, 0, total),
		slots:  make([]rankSlot, size),
		mask:   uint64(size - 1),
		maxLen: maxLen,
	}
	for tok, r := range ranks {
		h := maphash.String(t.seed, tok)
		i := h & t.mask
		for t.slots[i].n != 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i] = rankSlot{off: uint32(len(t.bytes)), rank: uint32(r), n: uint16(len(tok)), tag: uint16(h >> 48)}
		t.bytes = append(t.bytes, tok...)
	}
	return t, nil
}

// rank returns the rank of the token whose bytes are s, or noRank when s is not a token.
func (t *rankTable) rank(s string) uint32 {
	if len(s) > t.maxLen {
		return noRank
	}
	h := maphash.String(t.seed, s)
	tag := uint16(h >> 48)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		sl := &t.slots[i]
		if sl.n == 0 {
			return noRank
		}
		if sl.tag == tag && int(sl.n) == len(s) && string(t.bytes[sl.off:sl.off+uint32(sl.n)]) == s {
			return sl.rank
		}
	}
}

// id returns the token id of s where tiktoken-go would: its rank, or 0 when s is not a token
// (which never happens for the spans merge returns, as every single byte is a token).
func (t *rankTable) id(s string) int {
	if r := t.rank(s); r != noRank {
		return int(r)
	}
	return 0
}

// bpeSmall is the length up to which a piece is merged in arrays on the stack (in quadratic
// time, as tiktoken does); longer pieces are merged with a heap, in O(n log n).
const bpeSmall = 64

// countPiece returns the number of tokens of one piece of pre-tokenized text.
func (t *rankTable) countPiece(piece string) int {
	if t.rank(piece) != noRank {
		return 1
	}
	if len(piece) <= bpeSmall {
		var start [bpeSmall + 1]uint8
		return t.mergeSmall(piece, &start) - 1
	}
	return len(t.mergeLarge(piece)) - 1
}

// appendPiece appends the token ids of one piece of pre-tokenized text to ids.
func (t *rankTable) appendPiece(ids []int, piece string) []int {
	if r := t.rank(piece); r != noRank {
		return append(ids, int(r))
	}
	if len(piece) <= bpeSmall {
		var start [bpeSmall + 1]uint8
		n := t.mergeSmall(piece, &start)
		for i := 0; i+1 < n; i++ {
			ids = append(ids, t.id(piece[start[i]:start[i+1]]))
		}
		return ids
	}
	bounds := t.mergeLarge(piece)
	for i := 0; i+1 < len(bounds); i++ {
		ids = append(ids, t.id(piece[bounds[i]:bounds[i+1]]))
	}
	return ids
}

// mergeSmall is tiktoken's byte_pair_merge for a piece of at most bpeSmall bytes: starting
// from single bytes, it joins the adjacent pair of parts whose concatenation has the lowest
// rank (the leftmost such pair on a tie) until no adjacent pair is a token. It stores the
// start of each part, then len(piece), in start and returns how many it stored (one more than
// the number of tokens).
func (t *rankTable) mergeSmall(piece string, start *[bpeSmall + 1]uint8) int {
	// rank[i] is the rank of parts i and i+1 joined; noRank if that is not a token or there
	// is no part i+1.
	var rank [bpeSmall + 1]uint32
	n := len(piece) + 1
	for i := range n {
		start[i] = uint8(i)
		rank[i] = noRank
	}
	for i := 0; i+2 < n; i++ {
		rank[i] = t.rank(piece[i : i+2])
	}
	for {
		lo, at := uint32(noRank), -1
		for i, r := range rank[:n-1] {
			if r < lo {
				lo, at = r, i
			}
		}
		if at < 0 {
			return n
		}
		// Join parts at and at+1 (a finite rank means at+2 < n); then the ranks of the
		// joined part with its neighbours change.
		rank[at] = noRank
		if at+3 < n {
			rank[at] = t.rank(piece[start[at]:start[at+3]])
		}
		if at > 0 {
			rank[at-1] = t.rank(piece[start[at-1]:start[at+2]])
		}
		copy(start[at+1:n-1], start[at+2:n])
		copy(rank[at+1:n-1], rank[at+2:n])
		n--
	}
}

// mergeLarge is mergeSmall for a piece of any length, in O(n log n) time: the parts form a
// linked list and the ranks of adjacent pairs wait in a heap ordered by (rank, position), so
// that each step finds the lowest, leftmost pair without a scan. A heap entry whose rank is no
// longer that of its pair is skipped: a pair's span only grows, so its rank never returns to
// an earlier value. It returns the start of each part, then len(piece).
func (t *rankTable) mergeLarge(piece string) []int32 {
	n := len(piece)
	// Parts are identified by their start offset. next[i] is the start of the part after
	// the one at i (n for the last), and prev[i] of the one before; rank[i] is as in
	// mergeSmall.
	next := make([]int32, n+1)
	prev := make([]int32, n+1)
	rank := make([]uint32, n+1)
	heap := make(rankHeap, 0, n)
	for i := range n + 1 {
		next[i], prev[i], rank[i] = int32(i+1), int32(i-1), noRank
	}
	for i := 0; i+2 <= n; i++ {
		if r := t.rank(piece[i : i+2]); r != noRank {
			rank[i] = r
			heap.push(r, int32(i))
		}
	}
	for len(heap) > 0 {
		r, i := heap.pop()
		if rank[i] != r {
			continue
		}
		j := next[i] // the part that joins the one at i
		next[i] = next[j]
		prev[next[j]] = i
		rank[i], rank[j] = noRank, noRank
		if k := next[i]; int(k) < n {
			if r := t.rank(piece[i:next[k]]); r != noRank {
				rank[i] = r
				heap.push(r, i)
			}
		}
		if i > 0 {
			p := prev[i]
			rank[p] = t.rank(piece[p:next[i]])
			if rank[p] != noRank {
				heap.push(rank[p], p)
			}
		}
	}
	var bounds []int32
	for i := int32(0); int(i) < n; i = next[i] {
		bounds = append(bounds, i)
	}
	return append(bounds, int32(n))
}

// rankHeap is a binary min-heap of (rank, position) pairs, each packed in a uint64 so that
// integer order is the merge order.
type rankHeap []uint64

func (h *rankHeap) push(rank uint32, pos int32) {
	*h = append(*h, uint64(rank)<<32|uint64(uint32(pos)))
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p] <= s[i] {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *rankHeap) pop() (rank uint32, pos int32) {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(s) {
			break
		}
		if c+1 < len(s) && s[c+1] < s[c] {
			c++
		}
		if s[i] <= s[c] {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	*h = s
	return uint32(top >> 32), int32(uint32(top))
}

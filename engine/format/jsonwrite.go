package format

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/types/known/structpb"
)

// jw is an append-based JSON writer. It does not check structure: callers emit well-formed
// sequences (the comma helpers keep separators right). Strings are escaped per RFC 8259 with
// U+2028/U+2029 escaped too and invalid UTF-8 replaced by U+FFFD, so the output is valid
// JSON and valid JavaScript whatever the input; HTML characters are left as they are.
type jw struct {
	b []byte
	// first is true right after an opening brace or bracket, when no comma is due.
	first bool
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a quoted JSON string.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendEscaped(b, s)
	return append(b, '"')
}

// Word-at-a-time constants: a byte in every lane.
const (
	lanes01 = 0x0101010101010101
	lanes80 = 0x8080808080808080
)

// maskLanes holds the operands of wordMask: x^0x02, x^0x5c, -0x21 and -0x01 in every lane,
// then the high bits. Read from memory, they become operands of the instructions of the
// word loops; as constants the compiler would load each into a register with a 10-byte
// move every time round the loop.
var maskLanes = [5]uint64{lanes01 * 0x02, lanes01 * '\\', 1<<64 - lanes01*0x21, 1<<64 - lanes01, lanes80}

// wordMask flags, in the high bit of each byte lane, the bytes of the little-endian word x
// that are not printable ASCII or are '"' or '\\': the bytes that JSON strings cannot hold
// raw or that need UTF-8 checks. The borrows of the subtractions can flag lanes above a real
// hit, never below one, so the lowest flagged lane is exact; a zero mask means all 8 bytes
// are copied as they are. A zero byte is always flagged.
//
// Flipping bit 1 swaps '"' (0x22) with the space and '!' with '#' and maps the controls
// and the bytes from 0x80 onto themselves, so "control, '"' or not ASCII" becomes y < 0x21
// or y >= 0x80 for y = x^0x02: y-0x21 has its high bit set for y < 0x21 (and y >= 0xa1),
// y itself for y >= 0x80. The backslash is the zero of z = x^0x5c: z-1 has its high bit set
// for z = 0 (and z >= 0x81, not ASCII anyway). A lane borrows from the next one only when it
// is itself a hit (y < 0x21 or z = 0) or it was borrowed from.
func wordMask(x uint64) uint64 {
	c := &maskLanes
	y, z := x^c[0], x^c[1]
	return ((y + c[2]) | y | (z + c[3])) & c[4]
}

// load64 returns the 8 bytes at p+i as a little-endian word: byte i in the low lane.
func load64(p *byte, i int) uint64 {
	return binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(unsafe.Pointer(p), i))[:])
}

// load32 returns the 4 bytes at p+i as a little-endian word.
func load32(p *byte, i int) uint32 {
	return binary.LittleEndian.Uint32((*[4]byte)(unsafe.Add(unsafe.Pointer(p), i))[:])
}

// store64 stores x at q+j as a little-endian word.
func store64(q *byte, j int, x uint64) {
	binary.LittleEndian.PutUint64((*[8]byte)(unsafe.Add(unsafe.Pointer(q), j))[:], x)
}

// store32 stores x at q+j as a little-endian word.
func store32(q *byte, j int, x uint32) {
	binary.LittleEndian.PutUint32((*[4]byte)(unsafe.Add(unsafe.Pointer(q), j))[:], x)
}

// specialMask is wordMask of the 8 bytes at p+i (lanes in memory order).
func specialMask(p *byte, i int) uint64 {
	return wordMask(load64(p, i))
}

// skipPlain returns the index of the first byte at or after i that needs work, looking 8
// bytes at a time; near the end of s it may return an index of a plain byte (the caller's
// byte loop then handles the tail).
func skipPlain(s string, i int) int {
	p := unsafe.StringData(s)
	for i+8 <= len(s) {
		if m := specialMask(p, i); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	return i
}

// asciiEscapes holds, for each ASCII byte, how it is written inside a JSON string: the
// escape of the C0 controls, '"' and '\\' and the byte itself for the others, packed by
// packEscape for a single 8-byte store.
var asciiEscapes = func() (t [utf8.RuneSelf]uint64) {
	for c := range t {
		t[c] = packEscape(string(rune(c)))
	}
	for c := range 0x20 {
		t[c] = packEscape(`\u00` + hexDigits[c>>4:c>>4+1] + hexDigits[c&0xf:c&0xf+1])
	}
	for c, e := range map[byte]string{'"': `\"`, '\\': `\\`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '\b': `\b`, '\f': `\f`} {
		t[c] = packEscape(e)
	}
	return t
}()

// packEscape packs a sequence of 1 to 7 bytes into a little-endian word: the bytes from the
// low lane up, and the length less one in the top lane.
func packEscape(seq string) uint64 {
	var w uint64
	for k := len(seq) - 1; k >= 0; k-- {
		w = w<<8 | uint64(seq[k])
	}
	return w | uint64(len(seq)-1)<<56
}

// escSlack is the spare capacity appendEscaped keeps beyond one byte for each byte of s
// left. It covers the stores of a whole word: its bytes grow by at most 5 each (40 in all)
// and the 8-byte stores of escapeWords reach at most 8 bytes past what they keep, so a word
// writes at most 48 bytes past its own 8. The tail and escapeRune stay within that too.
const escSlack = 64

// appendEscaped appends the JSON escaping of s, without quotes, following the rules of jw.
//
// Like append, it writes into the spare capacity of b, growing it when needed; unlike
// append, it can leave bytes there past the returned slice's length.
func appendEscaped(b []byte, s string) []byte {
	// The output is d[:j], d being b extended to its capacity. After the check at the top
	// of the loop, len(d)-j >= len(s)-i+escSlack, so every store that follows, which may
	// write past what is kept, still falls within d.
	if len(s) == 0 {
		return b
	}
	d, j := b[:cap(b)], len(b)
	i := 0
	for {
		if len(d)-j < len(s)-i+escSlack {
			d = slices.Grow(d[:j], len(s)-i+(len(s)-i)/8+escSlack)
			d = d[:cap(d)]
		}
		if len(s)-i < 8 {
			break
		}
		// escapeWords stops with fewer than 8 bytes left, at a non-ASCII byte it leaves
		// to escapeRune, or when the slack runs low (escapeRune has 8 bytes of room
		// then too).
		i, j = escapeWords(d, j, s, i)
		if len(s)-i >= 8 && s[i] >= utf8.RuneSelf {
			i, j = escapeRune(d, j, s, i)
		}
	}
	if i == len(s) {
		return d[:j]
	}
	// The tail, shorter than a word: stored whole when it is plain, else byte by byte.
	q := unsafe.SliceData(d)
	x := loadTail(s, i)
	store64(q, j, x)
	if wordMask(x)&(1<<(8*(len(s)-i))-1) == 0 {
		return d[:j+len(s)-i]
	}
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			e := asciiEscapes[c]
			store64(q, j, e)
			i, j = i+1, j+1+int(e>>56)
		} else {
			i, j = escapeRune(d, j, s, i)
		}
	}
	return d[:j]
}

// escapeWords writes the escaping of s[i:] at d[j:] a word at a time while 8 bytes of s
// are left. It stops at a non-ASCII byte that does not start a valid rune inside the next 4
// bytes (or starts U+2028 or U+2029), and after a word that leaves less than escSlack of
// spare capacity for the rest. It returns the indexes where it stopped in s and d.
//
// Each word x is stored whole at the end of the output first. A plain word is kept as it
// is. Otherwise, from its lowest flagged lane k up, lane k is overwritten by its packed
// escape (an 8-byte store of which only the escape is kept) and the lanes above k are
// stored again right after the escape (a store of x shifted down by k+1 lanes); the bytes
// past what is kept are overwritten by the next store or left in spare capacity. A lane
// that wordMask flagged only because of a borrow has the byte itself as its escape. A valid
// rune stays in place within the word, or is copied with a 4-byte store when it runs on into
// the next word, which then starts after it.
func escapeWords(d []byte, j int, s string, i int) (int, int) {
	p, q := unsafe.StringData(s), unsafe.SliceData(d)
	// len(d)-j >= len(s)-i+escSlack holds while j-i <= lim.
	lim, end := len(d)-len(s)-escSlack, len(s)-8
words:
	for i <= end {
		x := load64(p, i)
		store64(q, j, x)
		m := wordMask(x)
		if m == 0 {
			i, j = i+8, j+8
			continue
		}
		// Lane k of x belongs at d[j+k] (j moves on with each escape).
		for m != 0 {
			// (m is not zero: the high bit spares the compiler's zero case.)
			k := bits.TrailingZeros64(m|1<<63) >> 3
			c := byte(x >> (8 * k & 63))
			if c >= utf8.RuneSelf {
				var w uint32
				n := 0
				if i+k+4 <= len(s) {
					w = load32(p, i+k)
					n = runeLen(w)
				}
				switch {
				case n == 0:
					return i + k, j + k
				case k+n <= 8:
					// Already in place: drop the flags of its bytes (all of
					// them for k+n = 8, where the shift gives 0).
					m &^= 1<<(8*(k+n)) - 1
					continue
				}
				store32(q, j+k, w)
				i, j = i+k+n, j+k+n
				if j-i > lim {
					break words
				}
				continue words
			}
			e := asciiEscapes[c]
			store64(q, j+k, e)
			j += int(e >> 56)
			// For k = 7 this stores all of x again, past what is kept.
			store64(q, j+k+1, x>>(8*(k+1)&63))
			m &= m - 1
		}
		i, j = i+8, j+8
		if j-i > lim {
			break
		}
	}
	return i, j
}

// loadTail returns s[i:], which is 1 to 7 bytes long, in the low lanes of a little-endian
// word with zeros above. It reads only bytes of s: one word ending at the end of s, shifted
// down, or for a string shorter than a word two overlapping half words (or three single
// bytes) whose shared lanes agree.
func loadTail(s string, i int) uint64 {
	p, n := unsafe.StringData(s), len(s)-i
	switch {
	case len(s) >= 8:
		return load64(p, len(s)-8) >> (64 - 8*n)
	case n >= 4:
		return uint64(load32(p, i)) | uint64(load32(p, len(s)-4))<<(8*(n-4))
	}
	return uint64(s[i]) | uint64(s[i+n/2])<<(8*(n/2)) | uint64(s[len(s)-1])<<(8*(n-1))
}

// escapeRune writes the JSON form of the non-ASCII rune or invalid byte at s[i] at d[j:],
// which has room for 8 bytes, and returns the indexes past it in s and d: a valid rune as
// it is, except U+2028 and U+2029, escaped; an invalid byte as \ufffd.
func escapeRune(d []byte, j int, s string, i int) (int, int) {
	q := unsafe.SliceData(d)
	if len(s)-i >= 4 {
		w := load32(unsafe.StringData(s), i)
		if n := runeLen(w); n > 0 {
			store32(q, j, w)
			return i + n, j + n
		}
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == utf8.RuneError && n == 1:
		store64(q, j, escFFFD)
		return i + 1, j + 6
	case r == '\u2028' || r == '\u2029':
		store64(q, j, esc202X|uint64(hexDigits[r&0xf])<<40)
		return i + n, j + 6
	}
	return i + n, j + copy(d[j:], s[i:i+n])
}

// \ufffd and \u202 packed as little-endian words; the last digit of \u2028 or \u2029 goes
// in lane 5.
const (
	escFFFD = '\\' | 'u'<<8 | 'f'<<16 | 'f'<<24 | 'f'<<32 | 'd'<<40
	esc202X = '\\' | 'u'<<8 | '2'<<16 | '0'<<24 | '2'<<32
)

// runeLen returns the length of the UTF-8 sequence at the low end of the little-endian word
// w, whose low byte is not ASCII, when it is a valid encoding (not overlong, not a
// surrogate, at most U+10FFFF) of a rune that is copied as it is; it returns 0 otherwise:
// for invalid bytes, which become U+FFFD, and for U+2028 and U+2029, which are escaped.
func runeLen(w uint32) int {
	c0, c1 := byte(w), byte(w>>8)
	cont := func(c byte) bool { return c&0xc0 == 0x80 }
	switch {
	case c0 < 0xc2: // a continuation byte, or the lead of an overlong 2-byte form
		return 0
	case c0 < 0xe0:
		if cont(c1) {
			return 2
		}
	case c0 < 0xf0:
		lo, hi := byte(0x80), byte(0xbf)
		switch c0 {
		case 0xe0:
			lo = 0xa0 // overlong below U+0800
		case 0xed:
			hi = 0x9f // surrogates U+D800 to U+DFFF
		}
		if lo <= c1 && c1 <= hi && cont(byte(w>>16)) && w&0xfeffff != 0xa880e2 { // E2 80 A8/A9
			return 3
		}
	case c0 < 0xf5:
		lo, hi := byte(0x80), byte(0xbf)
		switch c0 {
		case 0xf0:
			lo = 0x90 // overlong below U+10000
		case 0xf4:
			hi = 0x8f // above U+10FFFF
		}
		if lo <= c1 && c1 <= hi && cont(byte(w>>16)) && cont(byte(w>>24)) {
			return 4
		}
	}
	return 0
}

func (w *jw) comma() {
	if w.first {
		w.first = false
		return
	}
	w.b = append(w.b, ',')
}

// obj opens an object as a value (after a key or in an array).
func (w *jw) obj() {
	w.comma()
	w.b = append(w.b, '{')
	w.first = true
}

// arr opens an array as a value.
func (w *jw) arr() {
	w.comma()
	w.b = append(w.b, '[')
	w.first = true
}

func (w *jw) endObj() { w.b = append(w.b, '}'); w.first = false }
func (w *jw) endArr() { w.b = append(w.b, ']'); w.first = false }

// key writes a member name; the value that follows must not add a comma.
func (w *jw) key(k string) {
	w.comma()
	w.b = appendString(w.b, k)
	w.b = append(w.b, ':')
	w.first = true
}

// str writes a string value.
func (w *jw) str(s string) {
	w.comma()
	w.b = appendString(w.b, s)
}

// raw writes already-valid JSON text as a value.
func (w *jw) raw(v string) {
	w.comma()
	w.b = append(w.b, v...)
}

func (w *jw) boolean(v bool) {
	w.comma()
	w.b = strconv.AppendBool(w.b, v)
}

// b64 writes data as a base64 (standard alphabet, padded) string value.
func (w *jw) b64(data []byte) {
	w.comma()
	w.b = append(w.b, '"')
	w.b = base64.StdEncoding.AppendEncode(w.b, data)
	w.b = append(w.b, '"')
}

// Convenience: a string member, a raw member.
func (w *jw) kstr(k, v string) { w.key(k); w.str(v) }
func (w *jw) kraw(k, v string) { w.key(k); w.raw(v) }

// value writes a structpb value with object keys sorted, so output is deterministic.
func (w *jw) value(v *structpb.Value) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		w.str(k.StringValue)
	case *structpb.Value_BoolValue:
		w.boolean(k.BoolValue)
	case *structpb.Value_NumberValue:
		w.comma()
		w.b = appendFloat(w.b, k.NumberValue)
	case *structpb.Value_StructValue:
		w.structValue(k.StructValue)
	case *structpb.Value_ListValue:
		w.arr()
		for _, e := range k.ListValue.GetValues() {
			w.value(e)
		}
		w.endArr()
	default:
		w.raw("null")
	}
}

func (w *jw) structValue(s *structpb.Struct) {
	w.obj()
	keys := make([]string, 0, len(s.GetFields()))
	for k := range s.GetFields() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w.key(k)
		w.value(s.GetFields()[k])
	}
	w.endObj()
}

// appendFloat formats f as encoding/json does; NaN and infinities, which JSON cannot
// express, become null.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	abs := math.Abs(f)
	fmtc := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		fmtc = 'e'
	}
	b = strconv.AppendFloat(b, f, fmtc, -1, 64)
	if fmtc == 'e' {
		// clean up e-09 to e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

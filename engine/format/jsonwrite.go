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

// needsEscape marks ASCII bytes that cannot appear raw inside a JSON string.
var needsEscape = func() (t [utf8.RuneSelf]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'] = true
	t['\\'] = true
	return t
}()

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

// firstSpecial returns the index in s[i:i+8] (i+8 <= len(s)) of the first byte that needs
// work, or 8.
func firstSpecial(s string, i int) int {
	return bits.TrailingZeros64(specialMask(unsafe.StringData(s), i)) >> 3
}

// appendEscaped appends the JSON escaping of s, without quotes.
func appendEscaped(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		if i = skipPlain(s, i); i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if !needsEscape[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += n
			start = i
			continue
		}
		i += n
	}
	return append(b, s[start:]...)
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

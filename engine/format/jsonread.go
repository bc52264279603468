package format

import (
	"iter"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/compactord/compactord/engine"
)

// The reader works on JSON text held in a Go string. A body is checked once by validateJSON
// (grammar, UTF-8, nesting depth); after that the helpers below walk already-valid text
// lazily: they never build a tree, only visit the levels a format reader asks for, and hand
// out substrings of the body (zero-copy) for values and for strings without escapes. Memory
// therefore stays proportional to what a reader keeps, whatever the input's shape.

// maxDepth bounds nesting in any JSON this package reads. Real request bodies nest a few
// dozen levels at most (tool inputs included); hostile input cannot recurse deeper than this.
const maxDepth = 512

// jpath is a JSON path built on the stack while walking; it is rendered only for errors.
type jpath struct {
	parent *jpath
	key    string // object member name; empty when idx is used
	idx    int    // array index, valid when isIdx
	isIdx  bool
}

func (p *jpath) k(key string) *jpath { return &jpath{parent: p, key: key} }
func (p *jpath) i(i int) *jpath      { return &jpath{parent: p, idx: i, isIdx: true} }

// String renders the path as root.key[3].key.
func (p *jpath) String() string { return string(p.appendTo(nil)) }

// appendTo renders the path recursively; it keeps no pointer to any segment, so paths built
// on the stack while walking stay there.
func (p *jpath) appendTo(b []byte) []byte {
	if p == nil {
		return b
	}
	b = p.parent.appendTo(b)
	switch {
	case p.isIdx:
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(p.idx), 10)
		b = append(b, ']')
	case p.parent == nil:
		b = append(b, p.key...)
	default:
		b = append(b, '.')
		b = append(b, p.key...)
	}
	return b
}

func (p *jpath) invalid(desc string) error { return engine.Invalid(p.String(), desc) }

// validateJSON checks that s holds exactly one JSON value (surrounding whitespace allowed),
// in valid UTF-8, nested at most maxDepth deep. Errors name the path where parsing stopped,
// under root (which may be nil). The walk keeps its path in one reused stack, so validating
// allocates nothing whatever the input.
func validateJSON(s string, root *jpath) error {
	v := validator{s: s, root: root}
	i := v.ws(0)
	i, err := v.value(i, 0)
	if err != nil {
		return err
	}
	if i = v.ws(i); i != len(s) {
		return v.fail(v.unexpected(i, "after the top-level value"))
	}
	return nil
}

// seg is one step of the validator's path: a raw (quoted) key or an index.
type seg struct {
	rawKey string
	idx    int
	isIdx  bool
}

type validator struct {
	s     string
	root  *jpath
	stack []seg
}

// fail reports desc at the current path.
func (v *validator) fail(desc string) error {
	b := v.root.appendTo(nil)
	for _, sg := range v.stack {
		if sg.isIdx {
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(sg.idx), 10)
			b = append(b, ']')
			continue
		}
		if len(b) > 0 {
			b = append(b, '.')
		}
		b = append(b, unquote(sg.rawKey)...)
	}
	return engine.Invalid(string(b), desc)
}

func (v *validator) ws(i int) int {
	for i < len(v.s) {
		switch v.s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func (v *validator) unexpected(i int, where string) string {
	if i >= len(v.s) {
		return "malformed JSON: unexpected end of input " + where
	}
	r, _ := utf8.DecodeRuneInString(v.s[i:])
	return "malformed JSON: unexpected " + strconv.QuoteRune(r) + " at offset " + strconv.Itoa(i) + " " + where
}

func (v *validator) value(i int, depth int) (int, error) {
	if i >= len(v.s) {
		return i, v.fail(v.unexpected(i, "where a value was expected"))
	}
	switch c := v.s[i]; {
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return i, v.fail("JSON nested deeper than " + strconv.Itoa(maxDepth) + " levels")
		}
		if c == '{' {
			return v.object(i, depth+1)
		}
		return v.array(i, depth+1)
	case c == '"':
		j, ok := v.str(i)
		if !ok {
			return j, v.fail(v.badString(j))
		}
		return j, nil
	case c == '-' || (c >= '0' && c <= '9'):
		j, ok := v.number(i)
		if !ok {
			return j, v.fail(v.unexpected(j, "in a number"))
		}
		return j, nil
	case strings.HasPrefix(v.s[i:], "true"):
		return i + 4, nil
	case strings.HasPrefix(v.s[i:], "false"):
		return i + 5, nil
	case strings.HasPrefix(v.s[i:], "null"):
		return i + 4, nil
	}
	return i, v.fail(v.unexpected(i, "where a value was expected"))
}

func (v *validator) badString(j int) string {
	if j >= len(v.s) {
		return "malformed JSON: unterminated string"
	}
	if v.s[j] < 0x20 {
		return "malformed JSON: control character in string at offset " + strconv.Itoa(j)
	}
	if v.s[j] >= utf8.RuneSelf {
		return "invalid UTF-8 at offset " + strconv.Itoa(j)
	}
	return "malformed JSON: invalid escape in string at offset " + strconv.Itoa(j)
}

func (v *validator) object(i int, depth int) (int, error) {
	i = v.ws(i + 1)
	if i < len(v.s) && v.s[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(v.s) || v.s[i] != '"' {
			return i, v.fail(v.unexpected(i, "where an object key was expected"))
		}
		j, ok := v.str(i)
		if !ok {
			return j, v.fail(v.badString(j))
		}
		v.stack = append(v.stack, seg{rawKey: v.s[i:j]})
		i = v.ws(j)
		if i >= len(v.s) || v.s[i] != ':' {
			return i, v.fail(v.unexpected(i, "where ':' was expected"))
		}
		var err error
		if i, err = v.value(v.ws(i+1), depth); err != nil {
			return i, err
		}
		v.stack = v.stack[:len(v.stack)-1]
		i = v.ws(i)
		if i < len(v.s) && v.s[i] == ',' {
			i = v.ws(i + 1)
			continue
		}
		if i < len(v.s) && v.s[i] == '}' {
			return i + 1, nil
		}
		return i, v.fail(v.unexpected(i, "where ',' or '}' was expected"))
	}
}

func (v *validator) array(i int, depth int) (int, error) {
	i = v.ws(i + 1)
	if i < len(v.s) && v.s[i] == ']' {
		return i + 1, nil
	}
	v.stack = append(v.stack, seg{isIdx: true})
	for n := 0; ; n++ {
		v.stack[len(v.stack)-1].idx = n
		var err error
		if i, err = v.value(i, depth); err != nil {
			return i, err
		}
		i = v.ws(i)
		if i < len(v.s) && v.s[i] == ',' {
			i = v.ws(i + 1)
			continue
		}
		v.stack = v.stack[:len(v.stack)-1]
		if i < len(v.s) && v.s[i] == ']' {
			return i + 1, nil
		}
		return i, v.fail(v.unexpected(i, "where ',' or ']' was expected"))
	}
}

// str checks the string starting at the quote s[i] and returns the index after its closing
// quote; on failure it returns the offending offset and false.
func (v *validator) str(i int) (int, bool) {
	s := v.s
	i++
	for i < len(s) {
		if i = skipPlain(s, i); i >= len(s) {
			break
		}
		c := s[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(s) {
				return len(s), false
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(s) {
					return i, false
				}
				for _, h := range []byte(s[i+2 : i+6]) {
					if hexVal(h) < 0 {
						return i, false
					}
				}
				i += 6
			default:
				return i, false
			}
		case c < 0x20:
			return i, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				return i, false
			}
			i += n
		}
	}
	return len(s), false
}

func (v *validator) number(i int) (int, bool) {
	s := v.s
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return i, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return i, false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return i, false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return i, true
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// --- walking valid JSON ---

// jsonKind is the type of a JSON value, read from its first byte.
type jsonKind uint8

const (
	kindInvalid jsonKind = iota
	kindNull
	kindBool
	kindNumber
	kindString
	kindObject
	kindArray
)

// kindOf returns the kind of the valid JSON value v (no leading whitespace).
func kindOf(v string) jsonKind {
	if v == "" {
		return kindInvalid
	}
	switch v[0] {
	case '{':
		return kindObject
	case '[':
		return kindArray
	case '"':
		return kindString
	case 'n':
		return kindNull
	case 't', 'f':
		return kindBool
	}
	return kindNumber
}

func kindName(k jsonKind) string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "a boolean"
	case kindNumber:
		return "a number"
	case kindString:
		return "a string"
	case kindObject:
		return "an object"
	case kindArray:
		return "an array"
	}
	return "nothing"
}

func skipWS(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the closing quote of the valid string starting at s[i].
func skipString(s string, i int) int {
	j := i + 1
	for {
		k := strings.IndexByte(s[j:], '"')
		if k < 0 {
			return len(s)
		}
		j += k
		bs := 0
		for b := j - 1; b > i && s[b] == '\\'; b-- {
			bs++
		}
		if bs%2 == 0 {
			return j + 1
		}
		j++
	}
}

// skipValue returns the index after the valid value starting at s[i].
func skipValue(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '"':
		return skipString(s, i)
	case '{', '[':
		depth := 0
		for i < len(s) {
			switch s[i] {
			case '"':
				i = skipString(s, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(s) {
		switch s[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// members iterates over the members of the valid JSON object v, yielding each decoded key
// and the raw text of its value.
func members(v string) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		if kindOf(v) != kindObject {
			return
		}
		i := skipWS(v, 1)
		for i < len(v) && v[i] == '"' {
			j := skipString(v, i)
			key := unquote(v[i:j])
			i = skipWS(v, j)
			if i >= len(v) || v[i] != ':' {
				return
			}
			i = skipWS(v, i+1)
			e := skipValue(v, i)
			if !yield(key, v[i:e]) {
				return
			}
			i = skipWS(v, e)
			if i < len(v) && v[i] == ',' {
				i = skipWS(v, i+1)
			}
		}
	}
}

// elems iterates over the elements of the valid JSON array v, yielding index and raw text.
func elems(v string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		if kindOf(v) != kindArray {
			return
		}
		i := skipWS(v, 1)
		for n := 0; i < len(v) && v[i] != ']'; n++ {
			e := skipValue(v, i)
			if e == i || !yield(n, v[i:e]) {
				return
			}
			i = skipWS(v, e)
			if i < len(v) && v[i] == ',' {
				i = skipWS(v, i+1)
			}
		}
	}
}

// field returns the raw value of key in the valid object v, or "" when absent.
func field(v, key string) string {
	for k, val := range members(v) {
		if k == key {
			return val
		}
	}
	return ""
}

// unquote decodes the valid JSON string literal q (quotes included). Strings without escapes
// are returned as substrings of q without copying.
func unquote(q string) string {
	if len(q) < 2 {
		return ""
	}
	body := q[1 : len(q)-1]
	bs := strings.IndexByte(body, '\\')
	if bs < 0 {
		return body
	}
	b := make([]byte, 0, len(body))
	b = append(b, body[:bs]...)
	for i := bs; i < len(body); {
		c := body[i]
		if c != '\\' {
			k := strings.IndexByte(body[i:], '\\')
			if k < 0 {
				b = append(b, body[i:]...)
				break
			}
			b = append(b, body[i:i+k]...)
			i += k
			continue
		}
		if i+1 >= len(body) {
			break
		}
		switch body[i+1] {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, n := decodeU(body[i:])
			if n == 0 {
				return string(b)
			}
			b = utf8.AppendRune(b, r)
			i += n
			continue
		default: // '"', '\\', '/'
			b = append(b, body[i+1])
		}
		i += 2
	}
	return string(b)
}

// decodeU decodes \uXXXX (and a following low surrogate) at the start of s. Lone surrogates
// become U+FFFD, as encoding/json does.
func decodeU(s string) (rune, int) {
	r1, ok := hex4(s)
	if !ok {
		return 0, 0
	}
	if utf16.IsSurrogate(r1) {
		if r2, ok := hex4(s[6:]); ok {
			if r := utf16.DecodeRune(r1, r2); r != utf8.RuneError {
				return r, 12
			}
		}
		return utf8.RuneError, 6
	}
	return r1, 6
}

func hex4(s string) (rune, bool) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[2:6]) {
		h := hexVal(c)
		if h < 0 {
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	return r, true
}

// toValue converts valid JSON text to a structpb value (numbers become float64).
func toValue(v string) *structpb.Value {
	switch kindOf(v) {
	case kindNull:
		return structpb.NewNullValue()
	case kindBool:
		return structpb.NewBoolValue(v == "true")
	case kindNumber:
		f, _ := strconv.ParseFloat(v, 64)
		return structpb.NewNumberValue(f)
	case kindString:
		return structpb.NewStringValue(unquote(v))
	case kindObject:
		return structpb.NewStructValue(toStruct(v))
	case kindArray:
		l := &structpb.ListValue{}
		for _, e := range elems(v) {
			l.Values = append(l.Values, toValue(e))
		}
		return structpb.NewListValue(l)
	}
	return structpb.NewNullValue()
}

// toStruct converts the valid JSON object v to a Struct.
func toStruct(v string) *structpb.Struct {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for k, e := range members(v) {
		s.Fields[k] = toValue(e)
	}
	return s
}

// sval returns the decoded string when v is a JSON string, else "".
func sval(v string) string {
	if kindOf(v) != kindString {
		return ""
	}
	return unquote(v)
}

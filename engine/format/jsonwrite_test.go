package format

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/corpus"
)

// refEscape is the JSON escaping of s, one byte or rune at a time, with the rules of the jw
// doc comment: '"', '\\' and the C0 controls escaped (short forms where JSON has them),
// invalid UTF-8 bytes replaced by \ufffd one byte at a time, U+2028 and U+2029 escaped, and
// everything else (DEL and valid runes included) copied as it is.
func refEscape(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				sb.WriteString(`\"`)
			case c == '\\':
				sb.WriteString(`\\`)
			case c == '\n':
				sb.WriteString(`\n`)
			case c == '\r':
				sb.WriteString(`\r`)
			case c == '\t':
				sb.WriteString(`\t`)
			case c == '\b':
				sb.WriteString(`\b`)
			case c == '\f':
				sb.WriteString(`\f`)
			case c < 0x20:
				sb.WriteString(`\u00`)
				sb.WriteByte("0123456789abcdef"[c>>4])
				sb.WriteByte("0123456789abcdef"[c&0xf])
			default:
				sb.WriteByte(c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			sb.WriteString(`\ufffd`)
		case r == '\u2028':
			sb.WriteString(`\u2028`)
		case r == '\u2029':
			sb.WriteString(`\u2029`)
		default:
			sb.WriteString(s[i : i+n])
		}
		i += n
	}
	return sb.String()
}

// checkEscaped compares appendEscaped with refEscape on s, appending to prefixes of a few
// lengths and spare capacities so the word stores meet every alignment and growth case.
func checkEscaped(t *testing.T, s string) {
	t.Helper()
	want := refEscape(s)
	for _, pre := range []int{0, 1, 7} {
		for _, spare := range []int{0, 5, 64} {
			b := make([]byte, pre, pre+spare)
			for k := range b {
				b[k] = 'x'
			}
			got := appendEscaped(b, s)
			if string(got[:pre]) != strings.Repeat("x", pre) || string(got[pre:]) != want {
				t.Fatalf("appendEscaped(%d bytes + %d spare, %q)\n got %q\nwant %q", pre, spare, s, got[pre:], want)
			}
		}
	}
	if got, want := string(appendString(nil, s)), `"`+want+`"`; got != want {
		t.Fatalf("appendString(%q) = %q, want %q", s, got, want)
	}
}

// TestAppendEscapedMatchesReference checks the word-at-a-time escaper byte for byte against
// refEscape.
func TestAppendEscapedMatchesReference(t *testing.T) {
	// Every byte alone, and between plain bytes that put it in every lane of a word.
	for c := range 256 {
		checkEscaped(t, string([]byte{byte(c)}))
		for pre := range 17 {
			checkEscaped(t, strings.Repeat("a", pre)+string([]byte{byte(c)})+"bcdefghij")
		}
	}
	interesting := []string{
		"a", " ", "~", "\x7f", "\x00", "\x01", "\x1f", "\b", "\f", "\n", "\r", "\t", `"`, `\`, "/", "<", "&",
		"\x80", "\xbf", "\xc0", "\xc1", "\xc2", "\xdf", "\xe0", "\xe2", "\xed", "\xef", "\xf0", "\xf4", "\xf5", "\xff",
		"é", "\u07ff", "\u0800", "日", "\u2027", "\u2028", "\u2029", "\u202a", "\ud7ff", "\ue000", "\ufffd", "\uffff",
		"\U00010000", "🚀", "\U0010ffff",
		"\xe2\x80", "\xe2\x80\xa8"[:2], "\xed\xa0\x80", "\xed\x9f\xbf", "\xe0\x9f\xbf", "\xe0\xa0\x80",
		"\xf0\x8f\xbf\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf0\x9f\x9a", "\xc3",
		"\xc0\x80", "\xc1\xbf", "\xe0\x80\x80",
	}
	// Every pair, alone and padded into every position relative to a word boundary.
	for _, a := range interesting {
		for _, b := range interesting {
			checkEscaped(t, a+b)
			for pre := range 9 {
				checkEscaped(t, strings.Repeat("p", pre)+a+b+"q")
			}
		}
	}
	// Specials at every position of strings of length 0 to 40, and two at every pair of
	// positions.
	for n := range 41 {
		checkEscaped(t, strings.Repeat("z", n))
		for _, sp := range []string{"\n", `"`, "\x01", "é", "\xff", "\u2028", "🚀", "日"} {
			for i := 0; i+len(sp) <= n; i++ {
				s := strings.Repeat("z", i) + sp + strings.Repeat("z", n-i-len(sp))
				checkEscaped(t, s)
				for j := i + len(sp); j < n; j++ {
					b := []byte(s)
					b[j] = '\\'
					checkEscaped(t, string(b))
				}
			}
		}
	}
	// Random strings over an alphabet heavy in specials, of random lengths.
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := append(interesting, "abcdefgh", "x", "  ", "\n\t")
	for range 20000 {
		var sb strings.Builder
		for range rng.IntN(24) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		checkEscaped(t, sb.String())
	}
	// Random bytes.
	for range 20000 {
		b := make([]byte, rng.IntN(48))
		for k := range b {
			b[k] = byte(rng.Uint32())
		}
		checkEscaped(t, string(b))
	}
	// Long strings, so the reservation runs out and grows mid-string.
	checkEscaped(t, strings.Repeat("\x00", 1000))
	checkEscaped(t, strings.Repeat("\xff", 999))
	checkEscaped(t, strings.Repeat("a\u2028", 333))
	checkEscaped(t, strings.Repeat(`"\`, 500)+strings.Repeat("plain text ", 100))
}

// TestAppendEscapedCorpus compares appendEscaped with refEscape on every string field of
// every message of every corpus conversation.
func TestAppendEscapedCorpus(t *testing.T) {
	n := 0
	for _, f := range corpus.Files(t) {
		l, err := Lift(&compactorv1.LiftRequest{Body: string(corpus.Read(t, f))})
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		for _, m := range l.GetMessages() {
			for _, s := range messageStrings(nil, m) {
				checkEscaped(t, s)
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no strings in the corpus")
	}
}

// messageStrings appends the value of every string field of m, nested messages, lists and
// maps (keys too) included, in field order.
func messageStrings(out []string, m proto.Message) []string {
	return reflectStrings(out, m.ProtoReflect())
}

func reflectStrings(out []string, m protoreflect.Message) []string {
	fields := m.Descriptor().Fields()
	for k := range fields.Len() {
		fd := fields.Get(k)
		if !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		switch {
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				out = fieldStrings(out, fd, l.Get(i))
			}
		case fd.IsMap():
			v.Map().Range(func(mk protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapKey().Kind() == protoreflect.StringKind {
					out = append(out, mk.String())
				}
				out = fieldStrings(out, fd.MapValue(), mv)
				return true
			})
		default:
			out = fieldStrings(out, fd, v)
		}
	}
	return out
}

func fieldStrings(out []string, fd protoreflect.FieldDescriptor, v protoreflect.Value) []string {
	switch fd.Kind() {
	case protoreflect.StringKind:
		out = append(out, v.String())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		out = reflectStrings(out, v.Message())
	}
	return out
}

func FuzzAppendEscapedReference(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\xff", "\u2028", "🚀\n", "0123456789\t\"\\abcdef", "é日🚀\xe2\x80\xa9\xf0\x9f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkEscaped(t, s)
	})
}

// BenchmarkAppendEscaped escapes every string field of the first 20 messages of a SWE-agent
// conversation: code and tool output where about one byte in 25 needs an escape (mostly
// newlines, carriage returns and quotes; many words hold two).
func BenchmarkAppendEscaped(b *testing.B) {
	f := corpus.Named(b, corpus.LoadTestConversation)
	l, err := Lift(&compactorv1.LiftRequest{Body: string(corpus.Read(b, f))})
	if err != nil {
		b.Fatal(err)
	}
	var strs []string
	for _, m := range l.GetMessages()[:min(20, len(l.GetMessages()))] {
		strs = messageStrings(strs, m)
	}
	total, out, special := 0, 0, 0
	for _, s := range strs {
		total += len(s)
		out += len(refEscape(s))
		for k := range len(s) {
			if c := s[k]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
				special++
			}
		}
	}
	buf := make([]byte, 0, out+64)
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for _, s := range strs {
			buf = appendEscaped(buf, s)
		}
	}
	b.ReportMetric(float64(total)/float64(max(special, 1)), "B/special")
	b.ReportMetric(float64(len(strs)), "strings")
}

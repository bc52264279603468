package engine

import (
	"hash/maphash"
	"math/bits"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// keyer computes content keys: keyed hashes of message content, and the keys of
// conversations folded from them. Its secrets are random per Counter, so keys
// differ from one process to the next.
type keyer struct {
	seed   maphash.Seed
	init   uint64    // initial hash state
	secret [4]uint64 // content-key secrets
}

func newKeyer(seed maphash.Seed) keyer {
	return keyer{
		seed: seed,
		init: maphash.String(seed, "compactord"),
		secret: [4]uint64{
			maphash.String(seed, "compactord/content-key/0"),
			maphash.String(seed, "compactord/content-key/1"),
			maphash.String(seed, "compactord/content-key/2"),
			maphash.String(seed, "compactord/content-key/3"),
		},
	}
}

// contentKey identifies a message's content (everything the prefix hash covers: all fields
// but id and token_count) by a keyed 64-bit hash and its length.
type contentKey struct {
	h, n uint64
}

// valid reports whether the key was computed (n carries a marker bit).
func (k contentKey) valid() bool { return k.n != 0 }

// key hashes everything in m that canon(m) encodes: role, kind, lifecycle, pinned, provider
// options, the parts with all their fields, and the unknown fields of every message from m
// down.
//
// The message is read as a sequence of groups of four 64-bit words that determines its
// content: a header group (role, kind, lifecycle, pinned, the number of parts, which optional
// fields follow), then per part one group: a tag word (the content kind and its flags, the
// lengths of its strings up to 17, which optional fields follow) and one word for each of up
// to three strings: its bytes when up to 8 long, a keyed 64-bit hash of them otherwise (see
// strWord). Optional fields (provider options, unknown fields, inline data, tool content
// parts) add groups after their part's, as its tag announces. Groups are folded into two
// lanes, two words per 64×64→128-bit multiplication, the way wyhash (hash/maphash's portable
// implementation) folds its input; the secrets and initial lanes are random per keyer, so
// keys differ from one process to the next.
func (kr *keyer) key(m *compactorv1.Message) contentKey {
	k := &kr.secret
	parts := m.GetParts()
	opts := m.GetProviderOptions()
	unknown := m.UnknownFields()
	x := keyHasher{a: kr.init, b: k[2]}
	x.group(k,
		uint64(uint32(m.GetRole()))|uint64(uint32(m.GetKind()))<<32,
		uint64(uint32(m.GetLifecycle()))|b2u(m.GetPinned())<<32|b2u(len(opts) > 0)<<33|b2u(len(unknown) > 0)<<34,
		uint64(len(parts)), 0x5bd1e9955bd1e995)
	if len(opts) > 0 {
		x = kr.keyOptions(x, opts)
	}
	if len(unknown) > 0 {
		x = kr.keyBytes(x, unknown, 0)
	}
	x = kr.keyParts(x, parts)
	hi, lo := bits.Mul64(x.a^x.n^k[3], x.b^k[0])
	return contentKey{hi ^ lo, x.n | 1<<63}
}

// conversation computes the content key of every message of msgs into keys (which must have
// len(msgs) elements; keys already valid are kept) and folds them into the conversation's
// key under tokenizer id.
func (kr *keyer) conversation(msgs []*compactorv1.Message, keys []contentKey, id tokenizer.ID) convKey {
	k := &kr.secret
	a, b := kr.init, k[1]
	for i, m := range msgs {
		if !keys[i].valid() {
			keys[i] = kr.key(m)
		}
		hi, lo := bits.Mul64(keys[i].h^k[0], keys[i].n^a)
		a = hi ^ lo
		hi, lo = bits.Mul64(keys[i].h^k[2], b^k[3])
		b = hi ^ lo
	}
	return convKey{a: a, b: b, n: len(msgs), tk: id}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// keyHasher is the state of a content key: two lanes and the byte count.
type keyHasher struct {
	a, b uint64 // lanes
	n    uint64 // bytes of strings and bytes fields absorbed
}

// group absorbs four words: lane = hi ^ lo of (w ⊕ secret) × (w' ⊕ lane) for each lane. The
// lanes are independent, so their multiplications overlap.
func (x *keyHasher) group(k *[4]uint64, w0, w1, w2, w3 uint64) {
	hi, lo := bits.Mul64(w0^k[0], w1^x.a)
	x.a = hi ^ lo
	hi, lo = bits.Mul64(w2^k[1], w3^x.b)
	x.b = hi ^ lo
}

// Part tag words: bits 0-3 the content kind, bit 4 its flag (provider_executed, approved),
// bits 5-6 the source of an image or file (0 none, 1 data, 2 url), bits 8-15 the kind of a
// tool output, bits 16-30 the lengths of the three strings (each up to 16, 17 for longer
// ones), then which optional groups follow the part's, in this order: provider options, the
// unknown fields of the part, of its content message, of a tool output and of tool content,
// inline data, tool content parts.
const (
	tagFlag        = 1 << 4
	tagSourceData  = 1 << 5
	tagSourceURL   = 2 << 5
	tagOutputShift = 8
	tagLenShift    = 16

	tagHasOptions        = 1 << 36
	tagHasUnknown        = 1 << 37
	tagHasContentUnknown = 1 << 38
	tagHasOutputUnknown  = 1 << 39
	tagHasPartsUnknown   = 1 << 40
	tagHasData           = 1 << 41
	tagHasParts          = 1 << 42
	tagOptional          = tagHasOptions | tagHasUnknown | tagHasContentUnknown | tagHasOutputUnknown |
		tagHasPartsUnknown | tagHasData | tagHasParts

	tagOutputNil    = 0
	tagOutputNone   = 10
	tagOutputText   = 11
	tagOutputJSON   = 12
	tagOutputErrTxt = 13
	tagOutputErrJSN = 14
	tagOutputParts  = 15
	tagOutputDenied = 16
)

// keyParts absorbs the groups of parts. It is the hot loop of key: one group per part, the
// strings hashed in line.
func (kr *keyer) keyParts(x keyHasher, parts []*compactorv1.Part) keyHasher {
	k := &kr.secret
	for _, p := range parts {
		tag := b2u(len(p.GetProviderOptions()) > 0)*tagHasOptions | b2u(len(p.UnknownFields()) > 0)*tagHasUnknown
		switch ct := p.GetContent().(type) {
		case *compactorv1.Part_Text:
			t := ct.Text
			s := t.GetText()
			tag |= 1 | b2u(len(t.UnknownFields()) > 0)*tagHasContentUnknown | lenField(s, 0)
			x.n += uint64(len(s))
			x.group(k, tag, kr.strWord(s), 0, 0)
		case *compactorv1.Part_ToolCall:
			tc := ct.ToolCall
			id, name, in := tc.GetToolCallId(), tc.GetToolName(), tc.GetInputJson()
			tag |= 5 | b2u(tc.GetProviderExecuted())*tagFlag | b2u(len(tc.UnknownFields()) > 0)*tagHasContentUnknown |
				lenField(id, 0) | lenField(name, 1) | lenField(in, 2)
			x.n += uint64(len(id) + len(name) + len(in))
			x.group(k, tag, kr.strWord(id), kr.strWord(name), kr.strWord(in))
		case *compactorv1.Part_ToolResult:
			tr := ct.ToolResult
			out := tr.GetOutput()
			kind, text := outputKind(out)
			id, name := tr.GetToolCallId(), tr.GetToolName()
			tag |= 6 | kind<<tagOutputShift | b2u(len(tr.UnknownFields()) > 0)*tagHasContentUnknown |
				b2u(len(out.UnknownFields()) > 0)*tagHasOutputUnknown |
				lenField(id, 0) | lenField(name, 1) | lenField(text, 2)
			if kind == tagOutputParts {
				tag |= tagHasParts | b2u(len(out.GetContent().UnknownFields()) > 0)*tagHasPartsUnknown
			}
			x.n += uint64(len(id) + len(name) + len(text))
			x.group(k, tag, kr.strWord(id), kr.strWord(name), kr.strWord(text))
		default:
			x = kr.keyRarePart(x, p, tag)
			continue
		}
		if tag&tagOptional != 0 {
			x = kr.keyPartOptional(x, p, tag)
		}
	}
	return x
}

// keyRarePart absorbs the groups of a part that is not text, a tool call or a tool result;
// tag holds its provider options and unknown fields bits.
func (kr *keyer) keyRarePart(x keyHasher, p *compactorv1.Part, tag uint64) keyHasher {
	var s0, s1, s2 string // the part's strings, in order
	switch ct := p.GetContent().(type) {
	case *compactorv1.Part_Reasoning:
		r := ct.Reasoning
		s0, s1, s2 = r.GetText(), r.GetSignature(), r.GetRedactedData()
		tag |= 4 | b2u(len(r.UnknownFields()) > 0)*tagHasContentUnknown
	case *compactorv1.Part_Image:
		img := ct.Image
		tag |= 2 | b2u(len(img.UnknownFields()) > 0)*tagHasContentUnknown
		switch v := img.GetSource().(type) {
		case *compactorv1.ImagePart_Data:
			tag |= tagSourceData | tagHasData
		case *compactorv1.ImagePart_Url:
			tag |= tagSourceURL
			s0 = v.Url
		}
		s1 = img.GetMediaType()
	case *compactorv1.Part_File:
		f := ct.File
		tag |= 3 | b2u(len(f.UnknownFields()) > 0)*tagHasContentUnknown
		switch v := f.GetSource().(type) {
		case *compactorv1.FilePart_Data:
			tag |= tagSourceData | tagHasData
		case *compactorv1.FilePart_Url:
			tag |= tagSourceURL
			s0 = v.Url
		}
		s1, s2 = f.GetMediaType(), f.GetFilename()
	case *compactorv1.Part_ApprovalRequest:
		a := ct.ApprovalRequest
		s0, s1 = a.GetApprovalId(), a.GetToolCallId()
		tag |= 7 | b2u(len(a.UnknownFields()) > 0)*tagHasContentUnknown
	case *compactorv1.Part_ApprovalResponse:
		a := ct.ApprovalResponse
		s0, s1 = a.GetApprovalId(), a.GetReason()
		tag |= 8 | b2u(a.GetApproved())*tagFlag | b2u(len(a.UnknownFields()) > 0)*tagHasContentUnknown
	case *compactorv1.Part_Provider:
		pp := ct.Provider
		s0, s1, s2 = pp.GetProvider(), pp.GetType(), pp.GetJson()
		tag |= 9 | b2u(pp.GetTokenCountEstimated())*tagFlag | b2u(len(pp.UnknownFields()) > 0)*tagHasContentUnknown
	}
	tag |= lenField(s0, 0) | lenField(s1, 1) | lenField(s2, 2)
	x.n += uint64(len(s0) + len(s1) + len(s2))
	x.group(&kr.secret, tag, kr.strWord(s0), kr.strWord(s1), kr.strWord(s2))
	if pp := p.GetProvider(); pp != nil {
		x.group(&kr.secret, uint64(pp.GetTokenCount()), 9, 0, 0)
	}
	if tag&tagOptional != 0 {
		x = kr.keyPartOptional(x, p, tag)
	}
	return x
}

// lenField is the length field of the i-th string of a part in its tag word.
func lenField(s string, i int) uint64 { return uint64(min(len(s), 17)) << (tagLenShift + 5*i) }

// strWord is the word of a string in a part's group: 0 when empty; its bytes when up to 8
// long (a tag word holds the length); a keyed multiply fold of them up to 16; beyond, its
// wyhash (final version 3, as hash/maphash computes it where the runtime has no AES hash),
// keyed by the keyer's secrets and initial state, about 1.6 times as fast as maphash.String
// here. It is one function, not a dispatch to two, because it runs for every string of every
// planned conversation: the call saved is worth ~1 µs per 200 messages.
func (kr *keyer) strWord(s string) uint64 {
	k := &kr.secret
	n := len(s)
	switch {
	case n > 16:
	case n > 8:
		return wymix(le64(s[:8])^k[2], le64(s[n-8:])^k[3])
	case n >= 4:
		return uint64(le32(s[:4])) | uint64(le32(s[n-4:]))<<32
	case n > 0:
		return uint64(s[0]) | uint64(s[n>>1])<<8 | uint64(s[n-1])<<16
	default:
		return 0
	}
	seed := kr.init ^ k[0]
	p := s
	if len(p) > 48 {
		seed1, seed2 := seed, seed
		for len(p) > 48 {
			seed = wymix(le64(p[0:8])^k[1], le64(p[8:16])^seed)
			seed1 = wymix(le64(p[16:24])^k[2], le64(p[24:32])^seed1)
			seed2 = wymix(le64(p[32:40])^k[3], le64(p[40:48])^seed2)
			p = p[48:]
		}
		seed ^= seed1 ^ seed2
	}
	for len(p) > 16 {
		seed = wymix(le64(p[0:8])^k[1], le64(p[8:16])^seed)
		p = p[16:]
	}
	return wymix(0xa0761d6478bd642f^uint64(n), wymix(le64(s[n-16:])^k[1], le64(s[n-8:])^seed))
}

// wymix is hi ^ lo of a × b.
func wymix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// keyPartOptional absorbs the groups that follow a part's when its tag announces them, in
// the order of the tag bits.
func (kr *keyer) keyPartOptional(x keyHasher, p *compactorv1.Part, tag uint64) keyHasher {
	if tag&tagHasOptions != 0 {
		x = kr.keyOptions(x, p.GetProviderOptions())
	}
	if tag&tagHasUnknown != 0 {
		x = kr.keyBytes(x, p.UnknownFields(), tagHasUnknown)
	}
	var inner, data []byte
	var out *compactorv1.ToolOutput
	switch ct := p.GetContent().(type) {
	case *compactorv1.Part_Text:
		inner = ct.Text.UnknownFields()
	case *compactorv1.Part_ToolCall:
		inner = ct.ToolCall.UnknownFields()
	case *compactorv1.Part_ToolResult:
		inner, out = ct.ToolResult.UnknownFields(), ct.ToolResult.GetOutput()
	case *compactorv1.Part_Reasoning:
		inner = ct.Reasoning.UnknownFields()
	case *compactorv1.Part_Image:
		inner, data = ct.Image.UnknownFields(), ct.Image.GetData()
	case *compactorv1.Part_File:
		inner, data = ct.File.UnknownFields(), ct.File.GetData()
	case *compactorv1.Part_ApprovalRequest:
		inner = ct.ApprovalRequest.UnknownFields()
	case *compactorv1.Part_ApprovalResponse:
		inner = ct.ApprovalResponse.UnknownFields()
	case *compactorv1.Part_Provider:
		inner = ct.Provider.UnknownFields()
	}
	if tag&tagHasContentUnknown != 0 {
		x = kr.keyBytes(x, inner, tagHasContentUnknown)
	}
	if tag&tagHasOutputUnknown != 0 {
		x = kr.keyBytes(x, out.UnknownFields(), tagHasOutputUnknown)
	}
	if tag&tagHasPartsUnknown != 0 {
		x = kr.keyBytes(x, out.GetContent().UnknownFields(), tagHasPartsUnknown)
	}
	if tag&tagHasData != 0 {
		x = kr.keyBytes(x, data, tagHasData)
	}
	if tag&tagHasParts != 0 {
		ps := out.GetContent().GetParts()
		x.group(&kr.secret, uint64(len(ps)), 0, 0, 0x589965cc75374cc3)
		x = kr.keyParts(x, ps)
	}
	return x
}

// keyBytes absorbs a group with b's length, its keyed maphash and what, which names the
// field.
func (kr *keyer) keyBytes(x keyHasher, b []byte, what uint64) keyHasher {
	x.n += uint64(len(b))
	x.group(&kr.secret, uint64(len(b)), maphash.Bytes(kr.seed, b), what, 0xa0761d6478bd642f)
	return x
}

// keyOptions absorbs provider options by their deterministic encoding, in key order.
func (kr *keyer) keyOptions(x keyHasher, o map[string]*structpb.Struct) keyHasher {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	x.group(&kr.secret, uint64(len(o)), 0, 0, 0xe7037ed1a0b428db)
	for _, k := range keys {
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(o[k])
		x.n += uint64(len(k) + len(b))
		x.group(&kr.secret, uint64(len(k)), maphash.String(kr.seed, k), uint64(len(b)), maphash.Bytes(kr.seed, b))
	}
	return x
}

// outputKind returns the tag of a tool output's value and its text (empty for content parts).
func outputKind(o *compactorv1.ToolOutput) (uint64, string) {
	if o == nil {
		return tagOutputNil, ""
	}
	switch v := o.GetValue().(type) {
	case *compactorv1.ToolOutput_Text:
		return tagOutputText, v.Text
	case *compactorv1.ToolOutput_Json:
		return tagOutputJSON, v.Json
	case *compactorv1.ToolOutput_ErrorText:
		return tagOutputErrTxt, v.ErrorText
	case *compactorv1.ToolOutput_ErrorJson:
		return tagOutputErrJSN, v.ErrorJson
	case *compactorv1.ToolOutput_Denied:
		return tagOutputDenied, v.Denied
	case *compactorv1.ToolOutput_Content:
		return tagOutputParts, ""
	}
	return tagOutputNone, ""
}

package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"math/bits"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// PrefixSeed is h[0], the hash-chain value of the empty prefix: SHA-256 of
// "compactord/prefix-hash/v1". Changing the canonical form means changing this seed.
var PrefixSeed = sha256.Sum256([]byte("compactord/prefix-hash/v1"))

// Canon appends the canonical form of m to b and returns it: the deterministic protobuf
// encoding of m with id and token_count cleared (all other fields, unknown fields included,
// encoded as they are). m is not modified.
func Canon(b []byte, m *compactorv1.Message) []byte {
	c := withParts(m, m.GetParts())
	c.Id = ""
	out, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(b, c)
	if err != nil {
		// Marshal fails only on invalid UTF-8 in a string field, which gRPC never delivers
		// (it rejects such requests). For direct callers, hash the form with invalid bytes
		// replaced by U+FFFD, so that the chain stays defined for every input.
		s := proto.Clone(c)
		sanitizeUTF8(s.ProtoReflect())
		out, _ = proto.MarshalOptions{Deterministic: true}.MarshalAppend(b[:len(b):len(b)], s)
	}
	return out
}

// withParts returns a new message like m with parts: every field of m but token_count (and
// parts), unknown fields included. It is the one copy of a message's fields, which Canon and
// PruneAndCut share.
func withParts(m *compactorv1.Message, parts []*compactorv1.Part) *compactorv1.Message {
	nm := &compactorv1.Message{
		Id:              m.GetId(),
		Role:            m.GetRole(),
		Parts:           parts,
		Kind:            m.GetKind(),
		Lifecycle:       m.GetLifecycle(),
		Pinned:          m.GetPinned(),
		ProviderOptions: m.GetProviderOptions(),
	}
	if u := m.ProtoReflect().GetUnknown(); len(u) > 0 {
		nm.ProtoReflect().SetUnknown(u)
	}
	return nm
}

// sanitizeUTF8 replaces invalid UTF-8 in every string field of m, recursively.
func sanitizeUTF8(m protoreflect.Message) {
	fix := func(v protoreflect.Value) protoreflect.Value {
		return protoreflect.ValueOfString(strings.ToValidUTF8(v.String(), "\uFFFD"))
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				if fd.Kind() == protoreflect.StringKind {
					l.Set(i, fix(l.Get(i)))
				} else if fd.Message() != nil {
					sanitizeUTF8(l.Get(i).Message())
				}
			}
		case fd.IsMap():
			mp := v.Map()
			type kv struct {
				k protoreflect.MapKey
				v protoreflect.Value
			}
			var bad []kv
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapValue().Message() != nil {
					sanitizeUTF8(mv.Message())
				} else if fd.MapValue().Kind() == protoreflect.StringKind {
					mp.Set(k, fix(mv))
				}
				if fd.MapKey().Kind() == protoreflect.StringKind && !utf8.ValidString(k.String()) {
					bad = append(bad, kv{k, mv})
				}
				return true
			})
			for _, e := range bad {
				mp.Clear(e.k)
				mp.Set(protoreflect.ValueOfString(strings.ToValidUTF8(e.k.String(), "\uFFFD")).MapKey(), e.v)
			}
		case fd.Kind() == protoreflect.StringKind:
			m.Set(fd, fix(v))
		case fd.Message() != nil:
			sanitizeUTF8(v.Message())
		}
		return true
	})
}

// chainStep returns SHA-256(prev ‖ canon(m)), reusing h and buf.
func chainStep(h hash.Hash, buf *[]byte, prev [32]byte, m *compactorv1.Message) (next [32]byte) {
	*buf = Canon((*buf)[:0], m)
	h.Reset()
	h.Write(prev[:])
	h.Write(*buf)
	h.Sum(next[:0])
	return next
}

// prefixChain is the Counter's memo of the prefix hash chain: each step by the previous value
// and the message's content key, and whole values h[k] by the prefix's key, so that a
// conversation seen before only hashes its new messages.
type prefixChain struct {
	steps  *memo[chainKey, [32]byte]
	values *memo[prefixKey, [32]byte]
}

func newPrefixChain(stepBytes, valueBytes int64) prefixChain {
	return prefixChain{steps: newMemo[chainKey, [32]byte](stepBytes), values: newMemo[prefixKey, [32]byte](valueBytes)}
}

type chainKey struct {
	prev [32]byte
	contentKey
}

func (k chainKey) shard() int { return int(k.h >> 59) }

func (k chainKey) fp() uint64 {
	return k.h ^ bits.RotateLeft64(k.n, 23) ^ binary.LittleEndian.Uint64(k.prev[:8])
}

const chainEntryBytes = 160

// upTo returns h[0..k] of msgs, from the memoized steps where it can. keys holds the content
// keys computed so far; missing ones are filled in by kr.
func (pc *prefixChain) upTo(kr *keyer, msgs []*compactorv1.Message, keys []contentKey, k int) [][32]byte {
	out := make([][32]byte, k+1)
	out[0] = PrefixSeed
	var h hash.Hash
	var buf []byte
	for i := 0; i < k; i++ {
		if !keys[i].valid() {
			keys[i] = kr.key(msgs[i])
		}
		ck := chainKey{prev: out[i], contentKey: keys[i]}
		if v, ok := pc.steps.get(ck.shard(), ck); ok {
			out[i+1] = v
			continue
		}
		if h == nil {
			h = sha256.New()
		}
		out[i+1] = chainStep(h, &buf, out[i], msgs[i])
		pc.steps.put(ck.shard(), ck, out[i+1], chainEntryBytes)
	}
	return out
}

// HexHash formats a chain value as PlanResponse.prefix_hash does.
// It encodes into a stack array, so the string is its one allocation.
func HexHash(h [32]byte) string {
	var b [2 * len(h)]byte
	hex.Encode(b[:], h[:])
	return string(b[:])
}

// prefixKey identifies a prefix by its length and two independent folds of its messages'
// content keys.
type prefixKey struct {
	a, b uint64
	k    int
}

func (k prefixKey) shard() int { return int(k.a >> 59) }

func (k prefixKey) fp() uint64 { return k.a ^ k.b<<1 ^ uint64(k.k) }

// at returns h[k] of msgs: the memoized value when this prefix (its key folded from its
// messages' content keys) was seen before, otherwise by walking the memoized steps (and
// remembering the result). keys holds the content keys
// computed so far; missing ones are filled in by kr.
func (pc *prefixChain) at(kr *keyer, msgs []*compactorv1.Message, keys []contentKey, k int) [32]byte {
	a, b := kr.init, ^kr.init
	for i := 0; i < k; i++ {
		if !keys[i].valid() {
			keys[i] = kr.key(msgs[i])
		}
		a = (a ^ keys[i].h) * 0x9E3779B97F4A7C15
		a ^= a >> 29
		b = (b ^ keys[i].n ^ keys[i].h>>32) * 0xBF58476D1CE4E5B9
		b ^= b >> 31
		b += keys[i].h
	}
	pk := prefixKey{a, b, k}
	if v, ok := pc.values.get(pk.shard(), pk); ok {
		return v
	}
	v := pc.upTo(kr, msgs, keys, k)[k]
	pc.values.put(pk.shard(), pk, v, chainEntryBytes)
	return v
}

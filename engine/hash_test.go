package engine

import (
	"crypto/sha256"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

func hashTestConversation() []*compactorv1.Message {
	opts, _ := structpb.NewStruct(map[string]any{"cacheControl": map[string]any{"type": "ephemeral"}, "b": 1, "a": "x"})
	sys := plSysMsg("you are helpful")
	sys.ProviderOptions = map[string]*structpb.Struct{"anthropic": opts, "openai": opts}
	return []*compactorv1.Message{
		sys,
		plUserMsg("list files"),
		plAsstMsg(plText("ok"), plCall("c1", "ls", `{"path":"."}`)),
		plToolMsg(plResult("c1", "ls", "a.go\nb.go")),
		plAsstMsg(plText("two files")),
	}
}

// hashChain is the prefix-hash chain of msgs by its definition, unmemoized: n+1 values where
// h[0] is PrefixSeed and h[i+1] = SHA-256(h[i] ‖ Canon(msgs[i])). It is the reference the
// Counter's memoized chain is checked against.
func hashChain(msgs []*compactorv1.Message) [][32]byte {
	out := make([][32]byte, len(msgs)+1)
	out[0] = PrefixSeed
	h := sha256.New()
	var buf []byte
	for i, m := range msgs {
		out[i+1] = chainStep(h, &buf, out[i], m)
	}
	return out
}

// memoChain is the prefix-hash chain of msgs as c computes it, memoizing each step by the
// previous value and the message's content key.
func memoChain(c *Counter, msgs []*compactorv1.Message) [][32]byte {
	return c.chain.upTo(&c.keys, msgs, make([]contentKey, len(msgs)), len(msgs))
}

func TestHashChainDefinition(t *testing.T) {
	msgs := hashTestConversation()
	h := memoChain(NewCounter(1<<20), msgs)
	if len(h) != len(msgs)+1 {
		t.Fatalf("len = %d, want %d", len(h), len(msgs)+1)
	}
	if h[0] != sha256.Sum256([]byte("compactord/prefix-hash/v1")) || h[0] != PrefixSeed {
		t.Errorf("h[0] is not the documented seed")
	}
	for i, m := range msgs {
		// canon = deterministic encoding of a clone with id and token_count cleared.
		c := proto.Clone(m).(*compactorv1.Message)
		c.Id, c.TokenCount = "", 0
		canon, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256(append(h[i][:len(h[i]):len(h[i])], canon...))
		if h[i+1] != want {
			t.Errorf("h[%d] != SHA-256(h[%d] || canon(m[%d]))", i+1, i, i)
		}
	}
}

func TestHashChainIgnoresIDAndTokenCount(t *testing.T) {
	a := hashTestConversation()
	b := hashTestConversation()
	for i, m := range b {
		m.Id = "other-" + string(rune('a'+i))
		m.TokenCount = int64(100 + i)
	}
	ha, hb := hashChain(a), hashChain(b)
	for i := range ha {
		if ha[i] != hb[i] {
			t.Errorf("h[%d] depends on id or token_count", i)
		}
	}
	// Any content change changes every later value and no earlier one.
	b[2].Parts[1].GetToolCall().InputJson = `{"path":".."}`
	hc := hashChain(b)
	for i := range ha {
		if (ha[i] == hc[i]) != (i <= 2) {
			t.Errorf("h[%d]: equal = %v after changing message 2", i, ha[i] == hc[i])
		}
	}
	// Map order never matters: provider options rebuilt in another order hash the same.
	d := hashTestConversation()
	opts, _ := structpb.NewStruct(map[string]any{"a": "x", "b": 1, "cacheControl": map[string]any{"type": "ephemeral"}})
	d[0].ProviderOptions = map[string]*structpb.Struct{"openai": opts, "anthropic": opts}
	if hashChain(d)[1] != ha[1] {
		t.Errorf("provider options order changes the hash")
	}
}

func TestCounterHashChainMatchesPure(t *testing.T) {
	c := NewCounter(1 << 20)
	msgs := hashTestConversation()
	want := hashChain(msgs)
	for range 2 { // cold, then memoized
		got := memoChain(c, msgs)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("the Counter's chain h[%d] differs from hashChain", i)
			}
		}
	}
	// A fork that differs at message 1 shares only h[0..1].
	fork := hashTestConversation()
	fork[1] = plUserMsg("list directories")
	got, pure := memoChain(c, fork), hashChain(fork)
	for i := range pure {
		if got[i] != pure[i] {
			t.Fatalf("fork: h[%d] differs from hashChain", i)
		}
	}
}

// TestCanonCoversEveryMessageField fails when a field is added to Message without deciding
// whether the prefix hash (Canon), the content key (keyer.key) and PruneAndCut's copy carry it.
func TestCanonCoversEveryMessageField(t *testing.T) {
	handled := map[protoreflect.Name]bool{
		"id": true, "role": true, "parts": true, "kind": true, "lifecycle": true,
		"pinned": true, "provider_options": true, "token_count": true,
	}
	fields := (&compactorv1.Message{}).ProtoReflect().Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		if name := fields.Get(i).Name(); !handled[name] {
			t.Errorf("Message.%s is not handled by Canon, keyer.key and PruneAndCut", name)
		}
	}
	parts := (&compactorv1.Part{}).ProtoReflect().Descriptor().Fields()
	if parts.Len() != 10 {
		t.Errorf("Part has %d fields; update Canon, keyer.keyParts and keyRarePart, and tokenizer.Text.part", parts.Len())
	}
}

func TestHashChainInvalidUTF8(t *testing.T) {
	bad := []*compactorv1.Message{plUserMsg("ok \xff\xfe bytes")}
	good := []*compactorv1.Message{plUserMsg("ok \uFFFD bytes")} // a run of invalid bytes becomes one U+FFFD
	hb, hg := hashChain(bad), hashChain(good)
	if hb[1] != hg[1] {
		t.Errorf("invalid UTF-8 does not hash as its sanitized form")
	}
	if hb[1] == hashChain([]*compactorv1.Message{plUserMsg("ok  bytes")})[1] {
		t.Errorf("invalid bytes vanish from the hash")
	}
	if bad[0].Parts[0].GetText().GetText() != "ok \xff\xfe bytes" {
		t.Errorf("Canon modified its input")
	}
}

// TestDecisionPrefixChainMatchesHashChain: the chain Compact looks summaries up by equals the
// pure HashChain of the summarized prefix, ends at prefix_hash, and exists only for SUMMARIZE.
func TestDecisionPrefixChainMatchesHashChain(t *testing.T) {
	c := NewCounter(1 << 20)
	r := rand.New(rand.NewPCG(7, 11))
	summarized := 0
	for range 30 {
		msgs := genConversation(r)
		d, err := Decide(msgs, &compactorv1.Policy{ContextWindow: 4000, SummaryMaxTokens: 200}, c, Options{Force: true})
		if err != nil {
			continue // irreducible or invalid policy for this draw
		}
		got := d.PrefixChain()
		if d.Response.GetAction() != compactorv1.Action_ACTION_SUMMARIZE {
			if got != nil {
				t.Fatalf("%v decision has a prefix chain", d.Response.GetAction())
			}
			continue
		}
		summarized++
		cut := int(d.Response.GetCutIndex())
		want := hashChain(msgs[:cut])
		if len(got) != len(want) {
			t.Fatalf("PrefixChain has %d values, want %d", len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("PrefixChain h[%d] differs from HashChain", i)
			}
		}
		if HexHash(got[cut]) != d.Response.GetPrefixHash() {
			t.Fatal("PrefixChain does not end at prefix_hash")
		}
	}
	if summarized == 0 {
		t.Fatal("no generated conversation was summarized; the test checked nothing")
	}
}

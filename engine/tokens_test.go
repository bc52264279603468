package engine

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// countAll returns the count of every message of msgs under id (ignoring token_count), from
// c's memo, and the content keys computed (a zero key was not computed). Unless all is set,
// messages with a caller token count are left uncounted (zero).
func countAll(c *Counter, msgs []*compactorv1.Message, id tokenizer.ID, all bool) ([]msgCount, []contentKey, error) {
	counts := make([]msgCount, len(msgs))
	keys := make([]contentKey, len(msgs))
	err := c.counts.fill(&c.keys, msgs, id, counts, keys, nil, func(_ int, m *compactorv1.Message) bool {
		return all || m.GetTokenCount() <= 0
	})
	return counts, keys, err
}

func TestCounterMessage(t *testing.T) {
	c := NewCounter(0)
	m := plUserMsg("hello world")
	tests := []struct {
		name      string
		m         *compactorv1.Message
		tokenizer string
		want      int64
	}{
		{"o200k text", m, "o200k_base", MessageOverheadTokens + 2},
		{"default tokenizer", m, "", MessageOverheadTokens + 2},
		{"cl100k text", m, "cl100k_base", MessageOverheadTokens + 2},
		{"approx is bytes/4 rounded up", m, "approx", MessageOverheadTokens + 3},
		{"caller count wins", &compactorv1.Message{Role: compactorv1.Role_ROLE_USER, Parts: m.Parts, TokenCount: 77}, "o200k_base", 77},
		{"tool call", plAsstMsg(plCall("c1", "hello", "hello world")), "o200k_base",
			MessageOverheadTokens + ToolCallOverheadTokens + 1 + 2},
		{"tool result", plToolMsg(plResult("c1", "hello", "hello world")), "o200k_base",
			MessageOverheadTokens + ToolResultOverheadTokens + 2},
		{"approval", plAsstMsg(plApprovalReq("a1", "c1")), "o200k_base", MessageOverheadTokens + ApprovalTokens},
		{"image by url", plMsg(compactorv1.Role_ROLE_USER, &compactorv1.Part{Content: &compactorv1.Part_Image{Image: &compactorv1.ImagePart{
			Source: &compactorv1.ImagePart_Url{Url: "https://example.com/a.png"}}}}), "o200k_base", MessageOverheadTokens + DefaultImageTokens},
		{"text file inline", plMsg(compactorv1.Role_ROLE_USER, &compactorv1.Part{Content: &compactorv1.Part_File{File: &compactorv1.FilePart{
			Source: &compactorv1.FilePart_Data{Data: []byte("hello world")}, MediaType: "text/plain; charset=utf-8"}}}), "o200k_base", MessageOverheadTokens + 2},
		{"pdf inline: per page", plMsg(compactorv1.Role_ROLE_USER, &compactorv1.Part{Content: &compactorv1.Part_File{File: &compactorv1.FilePart{
			Source:    &compactorv1.FilePart_Data{Data: []byte("%PDF-1.4 1 0 obj <</Type /Pages>> 2 0 obj <</Type /Page>> 3 0 obj <</Type/Page /Parent 1 0 R>>")},
			MediaType: "application/pdf"}}}), "o200k_base", MessageOverheadTokens + 2*PDFPageTokens},
		{"binary file", plMsg(compactorv1.Role_ROLE_USER, &compactorv1.Part{Content: &compactorv1.Part_File{File: &compactorv1.FilePart{
			Source: &compactorv1.FilePart_Data{Data: []byte{1, 2, 3}}, MediaType: "application/zip"}}}), "o200k_base", MessageOverheadTokens + DefaultFileTokens},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 { // cold, then from the memo
				got, err := c.Message(tt.m, tt.tokenizer)
				if err != nil {
					t.Fatal(err)
				}
				if got != tt.want {
					t.Errorf("Message = %d, want %d", got, tt.want)
				}
			}
		})
	}
	if _, err := c.Message(m, "gpt2"); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown tokenizer: err = %v, want ErrInvalid", err)
	}
}

func TestCounterMemoizesByContent(t *testing.T) {
	c := NewCounter(1 << 20)
	conv := []*compactorv1.Message{plSysMsg("be brief"), plUserMsg("hello world"), plAsstMsg(plText("hi"))}
	counts1, _, err := countAll(c, conv, tokenizer.O200k, true)
	if err != nil {
		t.Fatal(err)
	}
	n1, _ := c.counts.memo.stats()
	if n1 != 3 {
		t.Fatalf("memo holds %d entries after 3 messages, want 3", n1)
	}
	// Same content under new ids and token counts: all hits, no new entries.
	again := make([]*compactorv1.Message, len(conv))
	for i, m := range conv {
		again[i] = &compactorv1.Message{Id: fmt.Sprint("id", i), Role: m.Role, Parts: m.Parts}
	}
	again = append(again, plUserMsg("one more turn"))
	counts2, _, err := countAll(c, again, tokenizer.O200k, true)
	if err != nil {
		t.Fatal(err)
	}
	if n2, _ := c.counts.memo.stats(); n2 != 4 {
		t.Errorf("memo holds %d entries after growing by one message, want 4", n2)
	}
	for i := range counts1 {
		if counts1[i].total != counts2[i].total {
			t.Errorf("message %d: %d then %d", i, counts1[i].total, counts2[i].total)
		}
	}
	// A different tokenizer is a different entry.
	if _, _, err := countAll(c, conv[:1], tokenizer.Cl100k, true); err != nil {
		t.Fatal(err)
	}
	if n3, _ := c.counts.memo.stats(); n3 != 5 {
		t.Errorf("memo holds %d entries after a cl100k count, want 5", n3)
	}
	// Changing any content changes the key.
	k1 := c.keys.key(plUserMsg("a"))
	withOpts := plUserMsg("a")
	opts, _ := structpb.NewStruct(map[string]any{"cacheControl": map[string]any{"type": "ephemeral"}})
	withOpts.Parts[0].ProviderOptions = map[string]*structpb.Struct{"anthropic": opts}
	for _, m := range []*compactorv1.Message{plUserMsg("b"), plAsstMsg(plText("a")), plPinned(plUserMsg("a")), plSummaryMsg("a"), withOpts} {
		if c.keys.key(m) == k1 {
			t.Errorf("key(%v) equals key of a different message", m)
		}
	}
}

type testKey int

func (k testKey) fp() uint64 { return uint64(k) }

// collidingKey has one fingerprint for all keys.
type collidingKey int

func (collidingKey) fp() uint64 { return 7 }

func TestMemoFingerprintCollisionIsAMiss(t *testing.T) {
	m := newMemo[collidingKey, msgCount](1 << 20)
	m.put(0, 1, msgCount{total: 1}, countEntryBytes)
	if v, ok := m.get(0, 1); !ok || v.total != 1 {
		t.Fatalf("get(1) = %v %v", v, ok)
	}
	if _, ok := m.get(0, 2); ok {
		t.Errorf("a key sharing a fingerprint was found")
	}
	m.put(0, 2, msgCount{total: 2}, countEntryBytes)
	if v, ok := m.get(0, 2); !ok || v.total != 2 {
		t.Errorf("get(2) = %v %v", v, ok)
	}
	if _, ok := m.get(0, 1); ok {
		t.Errorf("the replaced key is still found")
	}
	if n, used := m.stats(); n != 1 || used != countEntryBytes {
		t.Errorf("stats = %d entries, %d bytes; want 1, %d", n, used, countEntryBytes)
	}
}

func TestMemoStaysWithinBudget(t *testing.T) {
	const budget = 64 << 10
	m := newMemo[testKey, msgCount](budget)
	for i := range 100000 {
		m.put(i%memoShards, testKey(i), msgCount{total: int64(i)}, countEntryBytes)
	}
	entries, used := m.stats()
	if used > budget {
		t.Errorf("memo charges %d bytes, budget %d", used, budget)
	}
	if entries == 0 || int64(entries)*countEntryBytes != used {
		t.Errorf("entries %d, used %d: accounting is off", entries, used)
	}
	// Recently used entries survive a sweep.
	hot := 99999
	for i := 100000; i < 100000+entries/2; i++ {
		if _, ok := m.get(hot%memoShards, testKey(hot)); !ok {
			t.Fatalf("hot entry evicted after %d inserts", i-100000)
		}
		m.put(i%memoShards, testKey(i), msgCount{}, countEntryBytes)
	}
}

func TestCounterConcurrentUse(t *testing.T) {
	c := NewCounter(256 << 10)
	var conv []*compactorv1.Message
	for i := range 60 {
		conv = append(conv, plUserMsg(plWords(50, fmt.Sprint("w", i))))
	}
	want, _, err := countAll(c, conv, tokenizer.Approx, true)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 20 {
				// Different goroutines see different growing prefixes.
				k := 1 + (g*7+r*13)%len(conv)
				got, _, err := countAll(c, conv[:k], tokenizer.Approx, true)
				if err != nil {
					errs <- err
					return
				}
				for i := range got {
					if got[i].total != want[i].total {
						errs <- fmt.Errorf("message %d: %d, want %d", i, got[i].total, want[i].total)
						return
					}
				}
				if _, err := c.Message(conv[k-1], "o200k_base"); err != nil {
					errs <- err
					return
				}
				_ = memoChain(c, conv[:k])
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

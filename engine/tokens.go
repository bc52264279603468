package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"strings"
	"sync"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// Token costs of the parts of a message that are not plain text. The tokenizers count text
// exactly; the framing a provider adds around messages, tool calls and media is estimated
// with these constants (in the spirit of OpenAI's cookbook counting: a few tokens per message
// for the role and delimiters).
const (
	// MessageOverheadTokens is added once per message (role and delimiters).
	MessageOverheadTokens = 4
	// ToolCallOverheadTokens is added per tool call (id and call framing) on top of its name
	// and input.
	ToolCallOverheadTokens = 8
	// ToolResultOverheadTokens is added per tool result (call id and framing) on top of its
	// output.
	ToolResultOverheadTokens = 4
	// ApprovalTokens is the cost of an approval request or response (plus the reason's text).
	ApprovalTokens = 8
	// DefaultImageTokens is the cost of an image whose dimensions are unknown (given by URL,
	// or inline in a format whose header is not understood): the most an image costs on
	// Anthropic's API.
	DefaultImageTokens = 1600
	// DefaultFileTokens is the cost of a file whose content is not counted (given by URL, or
	// inline in a binary format other than PDF).
	DefaultFileTokens = 2000
	// PDFPageTokens is the cost of one page of an inline PDF (text plus page image).
	PDFPageTokens = 2000
)

// DefaultMemoBytes is the memo budget NewCounter uses when given zero or less.
const DefaultMemoBytes = 64 << 20

type tokenizerID uint8

const (
	tokO200k tokenizerID = iota
	tokCl100k
	tokApprox
)

func parseTokenizer(name string) (tokenizerID, bool) {
	switch name {
	case "", TokenizerO200k:
		return tokO200k, true
	case TokenizerCl100k:
		return tokCl100k, true
	case TokenizerApprox:
		return tokApprox, true
	}
	return tokO200k, false
}

// encoders holds the BPE encoders, built lazily from the tables embedded in
// tiktoken-go-loader on first use and read-only afterwards. Building one takes a few hundred
// milliseconds and about 8 MB (o200k_base) in a few objects the garbage collector need not
// scan (see bpe.go); it is done once per process, never per request.
var encoders [2]struct {
	once sync.Once
	enc  *bpe
	err  error
}

func encoder(id tokenizerID) (*bpe, error) {
	e := &encoders[id]
	e.once.Do(func() {
		name := TokenizerO200k
		if id == tokCl100k {
			name = TokenizerCl100k
		}
		e.enc, e.err = loadBPE(id)
		if e.err != nil {
			e.err = fmt.Errorf("load tokenizer %s: %w", name, e.err)
		}
	})
	return e.enc, e.err
}

// Preload loads the named tokenizer's tables now instead of on first use, so that a server
// can pay the cost at start-up. It returns an error for an unknown name.
func Preload(tokenizer string) error {
	id, ok := parseTokenizer(tokenizer)
	if !ok {
		return Invalid("policy.tokenizer", fmt.Sprintf("unknown tokenizer %q", tokenizer))
	}
	if id == tokApprox {
		return nil
	}
	_, err := encoder(id)
	return err
}

// Encode returns the token ids of text under the named tokenizer ("o200k_base",
// "cl100k_base"; "" means o200k_base). Special-token text such as "<|endoftext|>" is encoded
// as ordinary text, as provider APIs do with message content. It exists for tests and tools;
// the planner only counts.
func Encode(text, tokenizer string) ([]int, error) {
	id, ok := parseTokenizer(tokenizer)
	if !ok || id == tokApprox {
		return nil, Invalid("policy.tokenizer", fmt.Sprintf("no token ids for tokenizer %q", tokenizer))
	}
	enc, err := encoder(id)
	if err != nil {
		return nil, err
	}
	return enc.encode(text), nil
}

// textCounter counts the tokens of text under one tokenizer.
type textCounter struct {
	enc *bpe // nil for approx
}

func newTextCounter(id tokenizerID) (textCounter, error) {
	if id == tokApprox {
		return textCounter{}, nil
	}
	enc, err := encoder(id)
	return textCounter{enc: enc}, err
}

func (t textCounter) text(s string) int64 {
	if s == "" {
		return 0
	}
	if t.enc == nil {
		return int64(len(s)+3) / 4
	}
	return int64(t.enc.count(s))
}

// msgCount is the token count of one message. parts is set only for messages holding tool
// calls or results (what pruning needs), one entry per part.
type msgCount struct {
	total int64
	parts []partCount
}

// partCount is the tokens of one part: total, and payload, the share pruning can remove
// (a tool result's output, a tool call's input). For a tool call, call identifies the tool
// name and input (a keyed hash) so that identical calls are found without rehashing.
type partCount struct {
	total, payload int32
	call           uint64
	// marker is, for a tool result with a tool name, the tokens of the marker that would
	// replace its output (0 when not computed).
	marker int32
}

// hasToolParts reports whether a message holds tool calls or results.
func hasToolParts(m *compactorv1.Message) bool {
	for _, p := range m.GetParts() {
		switch p.GetContent().(type) {
		case *compactorv1.Part_ToolCall, *compactorv1.Part_ToolResult:
			return true
		}
	}
	return false
}

func clamp32(n int64) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(n)
}

// countMessage counts m with t, ignoring m.token_count. seed keys the tool-call hashes.
func (t textCounter) countMessage(m *compactorv1.Message, seed maphash.Seed) msgCount {
	var mc msgCount
	if hasToolParts(m) {
		mc.parts = make([]partCount, len(m.GetParts()))
	}
	mc.total = MessageOverheadTokens
	for i, p := range m.GetParts() {
		total, payload := t.part(p)
		mc.total += total
		if mc.parts != nil {
			mc.parts[i] = partCount{total: clamp32(total), payload: clamp32(payload)}
			if c := p.GetToolCall(); c != nil {
				mc.parts[i].call = callHash(seed, c)
			}
			if r := p.GetToolResult(); r != nil && r.GetToolName() != "" && payload > 2*MessageOverheadTokens {
				mc.parts[i].marker = clamp32(t.text(outputMarker(r.GetToolName(), payload, false)))
			}
		}
	}
	return mc
}

// callHash identifies a tool call by its tool name and input.
func callHash(seed maphash.Seed, c *compactorv1.ToolCallPart) uint64 {
	h := maphash.String(seed, c.GetToolName())
	return bits.RotateLeft64(h*0x9E3779B97F4A7C15, 31) ^ maphash.String(seed, c.GetInputJson())
}

// part returns the tokens of p and the share of them pruning can remove.
func (t textCounter) part(p *compactorv1.Part) (total, payload int64) {
	switch c := p.GetContent().(type) {
	case *compactorv1.Part_Text:
		n := t.text(c.Text.GetText())
		return n, n
	case *compactorv1.Part_Image:
		n := imageTokens(c.Image)
		return n, n
	case *compactorv1.Part_File:
		n := t.file(c.File)
		return n, n
	case *compactorv1.Part_Reasoning:
		n := t.text(c.Reasoning.GetText()) + int64(len(c.Reasoning.GetRedactedData())+3)/4
		return n, n
	case *compactorv1.Part_ToolCall:
		in := t.text(c.ToolCall.GetInputJson())
		return ToolCallOverheadTokens + t.text(c.ToolCall.GetToolName()) + in, in
	case *compactorv1.Part_ToolResult:
		out := t.output(c.ToolResult.GetOutput())
		return ToolResultOverheadTokens + out, out
	case *compactorv1.Part_ApprovalRequest:
		return ApprovalTokens, 0
	case *compactorv1.Part_ApprovalResponse:
		return ApprovalTokens + t.text(c.ApprovalResponse.GetReason()), 0
	}
	return 0, 0
}

func (t textCounter) output(o *compactorv1.ToolOutput) int64 {
	switch v := o.GetValue().(type) {
	case *compactorv1.ToolOutput_Text:
		return t.text(v.Text)
	case *compactorv1.ToolOutput_Json:
		return t.text(v.Json)
	case *compactorv1.ToolOutput_ErrorText:
		return t.text(v.ErrorText)
	case *compactorv1.ToolOutput_ErrorJson:
		return t.text(v.ErrorJson)
	case *compactorv1.ToolOutput_Denied:
		return t.text(v.Denied)
	case *compactorv1.ToolOutput_Content:
		var n int64
		for _, p := range v.Content.GetParts() {
			total, _ := t.part(p)
			n += total
		}
		return n
	}
	return 0
}

// file returns the tokens of a file: the text of an inline text file, PDFPageTokens per page
// of an inline PDF, DefaultFileTokens otherwise.
func (t textCounter) file(f *compactorv1.FilePart) int64 {
	data := f.GetData()
	if len(data) == 0 {
		return DefaultFileTokens
	}
	mt := strings.ToLower(f.GetMediaType())
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = strings.TrimSpace(mt[:i])
	}
	switch {
	case mt == "application/pdf":
		return int64(pdfPages(data)) * PDFPageTokens
	case textual(mt):
		return t.text(string(data))
	}
	return DefaultFileTokens
}

// textual reports whether a media type is text a model reads as such.
func textual(mt string) bool {
	if strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml") {
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/javascript", "application/x-yaml",
		"application/yaml", "application/x-sh", "application/sql", "application/x-python",
		"application/toml", "application/x-ndjson", "application/csv":
		return true
	}
	return false
}

// pdfPages counts the page objects of a PDF ("/Type /Page", not "/Type /Pages"); at least 1.
func pdfPages(data []byte) int {
	n := 0
	for rest := data; ; {
		i := bytes.Index(rest, []byte("/Type"))
		if i < 0 {
			break
		}
		rest = rest[i+len("/Type"):]
		j := 0
		for j < len(rest) && (rest[j] == ' ' || rest[j] == '\r' || rest[j] == '\n' || rest[j] == '\t') {
			j++
		}
		if bytes.HasPrefix(rest[j:], []byte("/Page")) {
			k := j + len("/Page")
			if k >= len(rest) || !isNameChar(rest[k]) {
				n++
			}
		}
	}
	return max(n, 1)
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// imageTokens returns the tokens of an image: when its dimensions can be read from the
// header of inline PNG, JPEG, GIF or WebP data, the larger of OpenAI's high-detail cost
// (85 + 170 per 512-px tile after fitting in 2048×2048 and scaling the short side to at most
// 768) and Anthropic's (w×h/750 after scaling the long edge to at most 1568, at most 1600);
// DefaultImageTokens otherwise.
func imageTokens(img *compactorv1.ImagePart) int64 {
	w, h, ok := imageSize(img.GetData())
	if !ok {
		return DefaultImageTokens
	}
	return max(openAIImageTokens(w, h), anthropicImageTokens(w, h))
}

func openAIImageTokens(w, h int) int64 {
	fw, fh := float64(w), float64(h)
	if s := 2048 / max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	if s := 768 / min(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	tiles := int64(math.Ceil(fw/512)) * int64(math.Ceil(fh/512))
	return 85 + 170*tiles
}

func anthropicImageTokens(w, h int) int64 {
	fw, fh := float64(w), float64(h)
	if s := 1568 / max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	return min(int64(math.Ceil(fw*fh/750)), 1600)
}

// imageSize reads the pixel dimensions from the header of PNG, GIF, JPEG or WebP data.
func imageSize(d []byte) (w, h int, ok bool) {
	switch {
	case len(d) >= 24 && string(d[:8]) == "\x89PNG\r\n\x1a\n" && string(d[12:16]) == "IHDR":
		w, h = int(binary.BigEndian.Uint32(d[16:20])), int(binary.BigEndian.Uint32(d[20:24]))
	case len(d) >= 10 && (string(d[:6]) == "GIF87a" || string(d[:6]) == "GIF89a"):
		w, h = int(binary.LittleEndian.Uint16(d[6:8])), int(binary.LittleEndian.Uint16(d[8:10]))
	case len(d) >= 4 && d[0] == 0xFF && d[1] == 0xD8:
		w, h = jpegSize(d)
	case len(d) >= 30 && string(d[:4]) == "RIFF" && string(d[8:12]) == "WEBP":
		switch string(d[12:16]) {
		case "VP8 ":
			w = int(binary.LittleEndian.Uint16(d[26:28]) & 0x3fff)
			h = int(binary.LittleEndian.Uint16(d[28:30]) & 0x3fff)
		case "VP8L":
			b := binary.LittleEndian.Uint32(d[21:25])
			w, h = int(b&0x3fff)+1, int(b>>14&0x3fff)+1
		case "VP8X":
			w = int(uint32(d[24])|uint32(d[25])<<8|uint32(d[26])<<16) + 1
			h = int(uint32(d[27])|uint32(d[28])<<8|uint32(d[29])<<16) + 1
		}
	}
	if w <= 0 || h <= 0 || w > 1<<20 || h > 1<<20 {
		return 0, 0, false
	}
	return w, h, true
}

// jpegSize walks JPEG segments to the first start-of-frame marker.
func jpegSize(d []byte) (w, h int) {
	i := 2
	for i+9 < len(d) {
		if d[i] != 0xFF {
			return 0, 0
		}
		marker := d[i+1]
		if marker == 0xFF { // fill byte
			i++
			continue
		}
		if marker == 0xD8 || marker == 0x01 || marker >= 0xD0 && marker <= 0xD7 {
			i += 2
			continue
		}
		size := int(binary.BigEndian.Uint16(d[i+2 : i+4]))
		if marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC {
			return int(binary.BigEndian.Uint16(d[i+7 : i+9])), int(binary.BigEndian.Uint16(d[i+5 : i+7]))
		}
		if size < 2 {
			return 0, 0
		}
		i += 2 + size
	}
	return 0, 0
}

// Counter counts the tokens of messages. It memoizes counts by a hash of each message's
// content (never its id or token_count) in a bounded memo, so a conversation that grows by
// one turn costs only the new turn; it also memoizes whole conversations (their counts and
// turn structure), so planning a conversation seen before costs one hash of its content and
// one lookup, the plans Plan made for them, and prefix-hash chain steps. One Counter
// serves a whole process: it is safe for concurrent use, and its memory stays within the
// budget given to NewCounter (plus the tokenizer tables, loaded once per process). The zero
// value is not usable: create Counters with NewCounter.
type Counter struct {
	pool      sync.Pool // of *scratch
	seed      maphash.Seed
	init      uint64    // initial key-hash state, random per Counter
	keySecret [4]uint64 // content-key secrets, random per Counter
	counts    *memo[countKey, msgCount]
	convs     *memo[convKey, *conversation]
	plans     *memo[planKey, *rememberedPlan]
	chain     *memo[chainKey, [32]byte]
	prefixes  *memo[prefixKey, [32]byte]
}

// NewCounter returns a Counter whose memo holds at most about memoBytes bytes (entries are
// charged an estimate of their size including map overhead); memoBytes ≤ 0 means
// DefaultMemoBytes. The budget is split: 7/16 to the token counts of messages; 4/16 to whole
// conversations (each message's count and content hash and the turn structure, about 100
// bytes per message, so that planning a conversation seen before costs one lookup); 1/16 to
// the plans Plan made for those conversations (about 12 bytes per message); 2/16 each to
// hash-chain steps and prefix hashes. A conversation or plan larger than a quarter of its
// share is not memoized as a whole; its messages still are.
func NewCounter(memoBytes int) *Counter {
	if memoBytes <= 0 {
		memoBytes = DefaultMemoBytes
	}
	b := int64(memoBytes)
	seed := maphash.MakeSeed()
	return &Counter{
		seed: seed,
		init: maphash.String(seed, "compactord"),
		keySecret: [4]uint64{
			maphash.String(seed, "compactord/content-key/0"),
			maphash.String(seed, "compactord/content-key/1"),
			maphash.String(seed, "compactord/content-key/2"),
			maphash.String(seed, "compactord/content-key/3"),
		},
		counts:   newMemo[countKey, msgCount](b * 7 / 16),
		convs:    newMemoShards[convKey, *conversation](b/4, convShards),
		plans:    newMemoShards[planKey, *rememberedPlan](b/16, planShards),
		chain:    newMemo[chainKey, [32]byte](b / 8),
		prefixes: newMemo[prefixKey, [32]byte](b / 8),
	}
}

type countKey struct {
	contentKey
	tk tokenizerID
}

func (k countKey) fp() uint64 { return k.h ^ bits.RotateLeft64(k.n, 23) ^ uint64(k.tk)<<3 }

type chainKey struct {
	prev [32]byte
	contentKey
}

func (k chainKey) fp() uint64 {
	return k.h ^ bits.RotateLeft64(k.n, 23) ^ binary.LittleEndian.Uint64(k.prev[:8])
}

const (
	countEntryBytes = 128 // key, value, slot and map overhead
	chainEntryBytes = 160
)

// Message returns the tokens of m under the named tokenizer ("" = o200k_base): m.token_count
// when it is greater than zero, otherwise compactord's count (memoized). The error is a
// *ValidationError for an unknown tokenizer name.
func (c *Counter) Message(m *compactorv1.Message, tokenizer string) (int64, error) {
	id, ok := parseTokenizer(tokenizer)
	if !ok {
		return 0, Invalid("policy.tokenizer", fmt.Sprintf("unknown tokenizer %q", tokenizer))
	}
	if m.GetTokenCount() > 0 {
		return m.GetTokenCount(), nil
	}
	tc, err := newTextCounter(id)
	if err != nil {
		return 0, err
	}
	if id == tokApprox {
		return tc.countMessage(m, c.seed).total, nil
	}
	k := countKey{c.key(m), id}
	if mc, ok := c.counts.get(k.shard(), k); ok {
		return mc.total, nil
	}
	mc := tc.countMessage(m, c.seed)
	c.counts.put(k.shard(), k, mc, countEntryBytes+24*int64(len(mc.parts)))
	return mc.total, nil
}

// scratch is the working memory of one Decide call, reused through Counter.pool so that a
// warm plan allocates little more than its response.
type scratch struct {
	counts     []msgCount
	keys       []contentKey
	sel        []bool
	order      []int32
	class      []msgClass
	blocked    []int32
	turnStarts []int32
	results    []toolLink
	open       []openRef
	approvals  []openRef
	saved      []int64
	tail       []int64
	dupTable   []int32
	dup        []bool
	pruned     []PrunedPart
}

// resize returns s with length n and zeroed elements, reallocating only when it must.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	s = s[:n]
	clear(s)
	return s
}

func (c *Counter) getScratch() *scratch {
	if sc, ok := c.pool.Get().(*scratch); ok {
		return sc
	}
	return new(scratch)
}

// putScratch drops the references sc holds (memo values, ids) and returns it to the pool.
func (c *Counter) putScratch(sc *scratch) {
	clear(sc.counts[:cap(sc.counts)])
	clear(sc.open[:cap(sc.open)])
	clear(sc.approvals[:cap(sc.approvals)])
	clear(sc.pruned[:cap(sc.pruned)])
	c.pool.Put(sc)
}

// countAll returns the estimate of every message (ignoring token_count) and the content
// keys it computed (a zero key was not computed). Unless all is set, messages with a caller
// token count are left uncounted (zero); fillCounts counts them later if needed.
func (c *Counter) countAll(msgs []*compactorv1.Message, id tokenizerID, all bool) ([]msgCount, []contentKey, error) {
	counts := make([]msgCount, len(msgs))
	keys := make([]contentKey, len(msgs))
	err := c.fillCounts(msgs, id, counts, keys, nil, func(_ int, m *compactorv1.Message) bool {
		return all || m.GetTokenCount() <= 0
	})
	return counts, keys, err
}

// fillCounts counts the messages need(i, msgs[i]) selects, memoized, into counts (and their
// content keys into keys, where not valid yet). Lookups take each memo shard's lock once.
func (c *Counter) fillCounts(msgs []*compactorv1.Message, id tokenizerID, counts []msgCount, keys []contentKey, sc *scratch, need func(int, *compactorv1.Message) bool) error {
	tc, err := newTextCounter(id)
	if err != nil {
		return err
	}
	if id == tokApprox {
		for i, m := range msgs {
			if need(i, m) {
				counts[i] = tc.countMessage(m, c.seed)
			}
		}
		return nil
	}
	// Bucket message indexes by shard (counting sort), then visit each shard once.
	var start [memoShards + 1]int32
	if sc == nil {
		sc = new(scratch)
	}
	sc.sel = resize(sc.sel, len(msgs))
	sel := sc.sel
	for i, m := range msgs {
		if need(i, m) {
			sel[i] = true
			if !keys[i].valid() {
				keys[i] = c.key(m)
			}
			start[keys[i].shard()+1]++
		}
	}
	for s := 1; s <= memoShards; s++ {
		start[s] += start[s-1]
	}
	sc.order = resize(sc.order, int(start[memoShards]))
	order := sc.order
	fill := start
	for i := range msgs {
		if sel[i] {
			s := keys[i].shard()
			order[fill[s]] = int32(i)
			fill[s]++
		}
	}
	var misses []int32
	for s := 0; s < memoShards; s++ {
		lo, hi := start[s], start[s+1]
		if lo == hi {
			continue
		}
		sh := &c.counts.shards[s]
		sh.mu.Lock()
		for _, i := range order[lo:hi] {
			mc, ok := sh.lookup(countKey{keys[i], id})
			if ok {
				counts[i] = mc
			} else {
				misses = append(misses, i)
			}
		}
		sh.mu.Unlock()
	}
	for _, i := range misses {
		mc := tc.countMessage(msgs[i], c.seed)
		counts[i] = mc
		k := countKey{keys[i], id}
		c.counts.put(k.shard(), k, mc, countEntryBytes+24*int64(len(mc.parts)))
	}
	return nil
}

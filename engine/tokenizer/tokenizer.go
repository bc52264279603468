// Package tokenizer counts tokens the way OpenAI's tiktoken does, exactly, without the
// network: o200k_base and cl100k_base byte-pair encoders built from tables embedded in
// tiktoken-go-loader, and an approximate count (bytes / 4) for callers that ask for one.
//
// The API is small: Parse a tokenizer's name, New a Text for it, Count a string or a message
// Part. Encoders are built once per process (Load, Preload) and are read-only afterwards.
//
// The encoder (bpe.go) and the pre-tokenizer (pretok.go) are our own rather than
// tiktoken-go's, for a measured reason: on the largest corpus conversation tiktoken-go took
// 398–442 ms, 2.08 M allocations and 137 MB to count what this package counts in about
// 26 ms with 253 allocations, and its tables were 23.6 MB in 297,511 objects that every GC
// cycle marked, where ours are 7.7 MB the GC never scans (docs/PERFORMANCE.md). tiktoken-go
// and regexp2 remain the test oracles: the ids and the pieces are checked against them on
// every corpus string and by fuzzing.
package tokenizer

import (
	"fmt"
	"strconv"
	"sync"
)

// ID names a tokenizer.
type ID uint8

// The tokenizers.
const (
	O200k  ID = iota // OpenAI's o200k_base (GPT-4o and later): the default
	Cl100k           // OpenAI's cl100k_base (GPT-4, GPT-3.5)
	Approx           // no tokenizer: a quarter of the bytes, rounded up
)

// Names of the tokenizers, as the policy spells them.
const (
	NameO200k  = "o200k_base"
	NameCl100k = "cl100k_base"
	NameApprox = "approx"
)

// Parse returns the tokenizer called name ("" is o200k_base), and false for an unknown name.
func Parse(name string) (ID, bool) {
	switch name {
	case "", NameO200k:
		return O200k, true
	case NameCl100k:
		return Cl100k, true
	case NameApprox:
		return Approx, true
	}
	return O200k, false
}

// String returns the tokenizer's name.
func (id ID) String() string {
	switch id {
	case O200k:
		return NameO200k
	case Cl100k:
		return NameCl100k
	case Approx:
		return NameApprox
	}
	return "tokenizer(" + strconv.Itoa(int(id)) + ")"
}

// encoders holds the BPE encoders, built lazily from the tables embedded in
// tiktoken-go-loader on first use and read-only afterwards. Building one takes a few hundred
// milliseconds and about 8 MB (o200k_base) in a few objects the garbage collector need not
// scan (see bpe.go); it is done once per process, never per request.
var encoders [2]struct {
	once sync.Once
	enc  *Encoder
	err  error
}

// Load returns the encoder of a BPE tokenizer (O200k or Cl100k), building it on first use.
func Load(id ID) (*Encoder, error) {
	if int(id) >= len(encoders) {
		return nil, fmt.Errorf("tokenizer %v has no encoder", id)
	}
	e := &encoders[id]
	e.once.Do(func() {
		e.enc, e.err = loadEncoder(id)
		if e.err != nil {
			e.err = fmt.Errorf("load tokenizer %v: %w", id, e.err)
		}
	})
	return e.enc, e.err
}

// Preload loads a tokenizer's tables now instead of on first use, so that a server can pay
// the cost at start-up.
func Preload(id ID) error {
	if id == Approx {
		return nil
	}
	_, err := Load(id)
	return err
}

// Text counts the tokens of text, and of message parts, under one tokenizer. The zero Text
// is the approx tokenizer. It is a small value, safe for concurrent use.
type Text struct {
	enc *Encoder // nil for approx
}

// New returns the Text of a tokenizer, loading its tables on first use.
func New(id ID) (Text, error) {
	if id == Approx {
		return Text{}, nil
	}
	enc, err := Load(id)
	return Text{enc: enc}, err
}

// Count returns the tokens of s.
func (t Text) Count(s string) int64 {
	if s == "" {
		return 0
	}
	if t.enc == nil {
		return int64(len(s)+3) / 4
	}
	return int64(t.enc.Count(s))
}

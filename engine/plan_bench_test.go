package engine

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/cputime"
)

// Benchmarks for docs/PERFORMANCE.md ("Plan"). Run:
//
//	go test -run '^$' -bench 'Tokenize|Plan' -benchmem ./engine

// benchPolicy makes the largest corpus conversation (≈450k tokens) summarize: a 1M window
// with the trigger at 30% of it.
var benchPolicy = &compactorv1.Policy{ContextWindow: 1_000_000, TriggerRatio: 0.3, TargetRatio: 0.2}

// texts returns every string of msgs the tokenizer reads, and their total size.
func texts(msgs []*compactorv1.Message) ([]string, int64) {
	var out []string
	var n int64
	add := func(s string) {
		if s != "" {
			out = append(out, s)
			n += int64(len(s))
		}
	}
	for _, m := range msgs {
		for _, p := range m.GetParts() {
			add(p.GetText().GetText())
			add(p.GetToolCall().GetToolName())
			add(p.GetToolCall().GetInputJson())
			add(p.GetToolResult().GetOutput().GetText())
			add(p.GetToolResult().GetOutput().GetErrorText())
		}
	}
	return out, n
}

func largest(b *testing.B) []*compactorv1.Message {
	msgs := readCorpusFile(b, corpus.Largest(b))
	if err := DefaultLimits().Validate(msgs); err != nil {
		b.Fatal(err)
	}
	return msgs
}

// BenchmarkTokenizeLargest is raw tokenization alone: every string of the largest corpus
// conversation counted by the o200k_base encoder, as the Counter counts it, nothing else.
func BenchmarkTokenizeLargest(b *testing.B) {
	msgs := largest(b)
	strs, n := texts(msgs)
	enc, err := tokenizer.Load(tokenizer.O200k)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(n)
	cputime.Loop(b, func() {
		for _, s := range strs {
			_ = enc.Count(s)
		}
	})
}

// BenchmarkPlanLargestCold plans the largest corpus conversation with an empty memo each
// time: tokenization of everything plus all of Plan.
func BenchmarkPlanLargestCold(b *testing.B) {
	msgs := largest(b)
	_, n := texts(msgs)
	if _, err := tokenizer.Load(tokenizer.O200k); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(n)
	cputime.Loop(b, func() {
		if _, err := Plan(msgs, benchPolicy, NewCounter(0)); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkPlanColdOverhead alternates raw tokenization and a cold Plan of the largest
// corpus conversation within each iteration, so that both see the same machine load, and
// reports Plan's overhead over tokenization alone in percent, by wall time and by process
// CPU time.
func BenchmarkPlanColdOverhead(b *testing.B) {
	msgs := largest(b)
	strs, _ := texts(msgs)
	enc, err := tokenizer.Load(tokenizer.O200k)
	if err != nil {
		b.Fatal(err)
	}
	var raw, plan, rawCPU, planCPU time.Duration
	// Each phase starts from a collected heap, so that neither pays for the other's garbage.
	tokenize := func() {
		runtime.GC()
		t, c := time.Now(), cputime.Process()
		for _, s := range strs {
			_ = enc.Count(s)
		}
		raw += time.Since(t)
		rawCPU += cputime.Process() - c
	}
	planCold := func() {
		runtime.GC()
		t, c := time.Now(), cputime.Process()
		if _, err := Plan(msgs, benchPolicy, NewCounter(0)); err != nil {
			b.Fatal(err)
		}
		plan += time.Since(t)
		planCPU += cputime.Process() - c
	}
	odd := false
	for b.Loop() {
		// Alternate the order so that neither pays more of the other's garbage collection.
		if odd {
			planCold()
			tokenize()
		} else {
			tokenize()
			planCold()
		}
		odd = !odd
	}
	b.ReportMetric(float64(raw.Milliseconds())/float64(b.N), "raw-ms/op")
	b.ReportMetric(float64(plan.Milliseconds())/float64(b.N), "plan-ms/op")
	b.ReportMetric(100*(float64(plan)/float64(raw)-1), "overhead-%")
	if rawCPU > 0 {
		b.ReportMetric(100*(float64(planCPU)/float64(rawCPU)-1), "cpu-overhead-%")
	}
}

// BenchmarkPlanLargestWarm plans the largest corpus conversation again and again with one
// Counter: every count and hash-chain step comes from the memo.
func BenchmarkPlanLargestWarm(b *testing.B) {
	msgs := largest(b)
	c := NewCounter(0)
	r, err := Plan(msgs, benchPolicy, c)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d messages: %v, %d → %d tokens", len(msgs), r.Action, r.TokensBefore, r.TokensAfter)
	cputime.Loop(b, func() {
		if _, err := Plan(msgs, benchPolicy, c); err != nil {
			b.Fatal(err)
		}
	})
}

// conversation200 is a 200-message coding-agent conversation: a system prompt, user requests
// and rounds of one tool call with a mid-sized output, ≈ 60 kB of text.
func conversation200() []*compactorv1.Message {
	msgs := []*compactorv1.Message{plSysMsg(plWords(300, "sys"))}
	for i := 0; len(msgs) < 200; i++ {
		if i%10 == 0 {
			msgs = append(msgs, plUserMsg(plWords(40, fmt.Sprint("u", i))))
			continue
		}
		id := fmt.Sprint("call_", i)
		msgs = append(msgs,
			plAsstMsg(plText(plWords(15, fmt.Sprint("a", i))), plCall(id, "read_file", fmt.Sprintf(`{"path":"src/file%d.go"}`, i))),
			plToolMsg(plResult(id, "read_file", plWords(80, fmt.Sprint("o", i)))))
	}
	return msgs[:200]
}

// decodedCopies returns k copies of msgs, each marshaled and decoded again the way the
// service's codec decodes a request (UnmarshalVTUnsafe over a private copy of the wire
// bytes, so a copy's strings lie in one buffer, in message order), so that no copy shares a
// message, a part or string data with msgs or another copy: a warm plan of one copy cannot
// profit from pointer identity with an earlier one.
func decodedCopies(tb testing.TB, msgs []*compactorv1.Message, k int) [][]*compactorv1.Message {
	tb.Helper()
	wire, err := proto.Marshal(&compactorv1.PlanRequest{Messages: msgs})
	if err != nil {
		tb.Fatal(err)
	}
	out := make([][]*compactorv1.Message, k)
	for i := range out {
		var r compactorv1.PlanRequest
		if err := r.UnmarshalVTUnsafe(bytes.Clone(wire)); err != nil {
			tb.Fatal(err)
		}
		out[i] = r.Messages
	}
	return out
}

// BenchmarkPlanWarm200 plans a 200-message conversation with a warm memo, at windows where
// nothing is needed, where pruning does it and where it summarizes; and with every message's
// token_count supplied by the caller (no hashing: the planner alone). Like the service, which
// decodes every request afresh, each iteration plans a different decoded copy of the same
// content.
func BenchmarkPlanWarm200(b *testing.B) {
	msgs := conversation200()
	_, n := texts(msgs)
	counted := make([]*compactorv1.Message, len(msgs))
	c0 := NewCounter(0)
	for i, m := range msgs {
		k, err := c0.Message(m, "")
		if err != nil {
			b.Fatal(err)
		}
		counted[i] = &compactorv1.Message{Role: m.Role, Parts: m.Parts, TokenCount: k}
	}
	for _, bc := range []struct {
		name string
		w    int64
		msgs []*compactorv1.Message
	}{
		{"none", 200000, msgs}, {"prune", 40000, msgs}, {"summarize", 16000, msgs},
		{"none_caller_counts", 200000, counted}, {"summarize_caller_counts", 16000, counted},
	} {
		b.Run(bc.name, func(b *testing.B) {
			msgs, w := bc.msgs, bc.w
			copies := decodedCopies(b, msgs, 4)
			p := &compactorv1.Policy{ContextWindow: w}
			c := NewCounter(0)
			r, err := Plan(msgs, p, c)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%d messages, %d bytes of text: %v, %d → %d tokens", len(msgs), n, r.Action, r.TokensBefore, r.TokensAfter)
			i := 0
			cputime.Loop(b, func() {
				if _, err := Plan(copies[i%len(copies)], p, c); err != nil {
					b.Fatal(err)
				}
				i++
			})
		})
	}
}

// BenchmarkPlanGrow200 plans a 200-message conversation whose first 199 messages the Counter
// has seen and whose last one it has not: the common case of a conversation that grew since
// its last plan. Every iteration plans a different last message (a tool result, generated
// before the timer starts) after a decoded copy of the known 199: about 500 bytes of output,
// or a short one ("_short"), whose tokenization does not hide the planner's own cost. The
// new_turn_only sub-benchmarks count those last messages alone, cold: the tokenizer's share,
// which no memo can save.
func BenchmarkPlanGrow200(b *testing.B) {
	base := conversation200()
	prefixes := decodedCopies(b, base[:199], 4)
	lasts := func(b *testing.B, short bool) []*compactorv1.Message {
		out := make([]*compactorv1.Message, b.N)
		for i := range out {
			text := plWords(80, fmt.Sprint("o", i, "v"))
			if short {
				text = fmt.Sprint("exit status ", i)
			}
			out[i] = plToolMsg(plResult("call_104", "read_file", text))
		}
		return out
	}
	for _, bc := range []struct {
		name  string
		w     int64
		short bool
	}{{"none", 200000, false}, {"summarize", 16000, false}, {"none_short", 200000, true}, {"summarize_short", 16000, true}} {
		b.Run(bc.name, func(b *testing.B) {
			p := &compactorv1.Policy{ContextWindow: bc.w}
			c := NewCounter(0)
			if _, err := Plan(base, p, c); err != nil {
				b.Fatal(err)
			}
			last := lasts(b, bc.short)
			conv := make([]*compactorv1.Message, len(base))
			cputime.LoopN(b, func(i int) {
				copy(conv, prefixes[i%len(prefixes)])
				conv[len(conv)-1] = last[i]
				if _, err := Plan(conv, p, c); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
	for _, short := range []bool{false, true} {
		name := "new_turn_only"
		if short {
			name += "_short"
		}
		b.Run(name, func(b *testing.B) {
			tc, err := tokenizer.New(tokenizer.O200k)
			if err != nil {
				b.Fatal(err)
			}
			seed := NewCounter(1 << 20).counts.seed
			last := lasts(b, short)
			cputime.LoopN(b, func(i int) { _ = countMessage(tc, last[i], seed) })
		})
	}
}

// BenchmarkPlanWarmCorpus plans the corpus conversations with the most messages, warm.
func BenchmarkPlanWarmCorpus(b *testing.B) {
	for _, name := range []string{"minisweagent-gemini3-django__django-14349.openai.json", "minisweagent-gemini3-django__django-16560.openai.json"} {
		f := corpus.Named(b, name)
		msgs := readCorpusFile(b, f)
		_, n := texts(msgs)
		b.Run(fmt.Sprintf("%dmsgs_%dkB", len(msgs), n/1000), func(b *testing.B) {
			p := &compactorv1.Policy{ContextWindow: 32000}
			c := NewCounter(0)
			r, err := Plan(msgs, p, c)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%v, %d → %d tokens", r.Action, r.TokensBefore, r.TokensAfter)
			cputime.Loop(b, func() {
				if _, err := Plan(msgs, p, c); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

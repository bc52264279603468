package service_test

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/internal/llmtest"
	"github.com/compactord/compactord/limit"
	"github.com/compactord/compactord/summarize"
)

// chunkBound is the max_input_tokens of the chunking tests: a few turns of
// irtest.Conversation a call.
const chunkBound = 6000

var (
	reqMarker  = regexp.MustCompile(`req-(\d\d)`)
	callMarker = regexp.MustCompile(`\[tool call read_file id=(call_\d\d)\]`)
	outMarker  = regexp.MustCompile(`\[tool result read_file id=(call_\d\d)\]`)
)

// transcriptOf is the transcript of a summary prompt, and the previous summary it carries.
func transcriptOf(prompt string) (transcript, previous string) {
	_, t, _ := strings.Cut(prompt, "<transcript>\n")
	t, _, _ = strings.Cut(t, "</transcript>")
	_, p, _ := strings.Cut(prompt, "<previous-summary>\n")
	p, _, _ = strings.Cut(p, "</previous-summary>")
	return t, p
}

// chunkReply answers each call with "CHUNK-<n> read req-…" naming the requests of its
// transcript: what the next call's anchor must carry.
func chunkReply(n int64, prompt string) (int, string) {
	t, _ := transcriptOf(prompt)
	return 0, fmt.Sprintf("CHUNK-%d read %s.", n, strings.Join(reqMarker.FindAllString(t, -1), " "))
}

// TestCompactChunksARangeOverTheInputBound: a range larger than the summarizer's
// max_input_tokens is read whole, in chunks at turn boundaries, oldest first, each call under
// the bound and anchored on the previous call's summary; the summary check runs on the final
// summary against the whole range, and the server span records the calls.
func TestCompactChunksARangeOverTheInputBound(t *testing.T) {
	for _, kind := range []string{summarize.KindOpenAI, summarize.KindOpenAIResponses, summarize.KindAnthropic} {
		t.Run(kind, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
			llm := llmtest.NewAnthropic(t)
			llm.MaxInput(chunkBound)
			llm.ScriptPrompt(chunkReply, 0)
			client := startReplica(t, replicaConfig{llm: llm, kind: kind, maxInput: chunkBound, tp: tp, cache: cache.NewMemory(cache.MemoryOptions{})})
			msgs := irtest.Conversation(40)
			resp, err := client.Compact(t.Context(), compactReq(msgs))
			if err != nil {
				t.Fatal(err)
			}
			checkCompacted(t, msgs, resp)
			calls := int(llm.Calls())
			if calls < 3 {
				t.Fatalf("%d calls for a conversation of %d tokens under a bound of %d; want it in chunks", calls, resp.GetPlan().GetTokensBefore(), chunkBound)
			}
			var read []string
			for n := 1; n <= calls; n++ {
				tr, prev := transcriptOf(llm.Prompt(n))
				if want := fmt.Sprintf("CHUNK-%d read", n-1); (n == 1) != (prev == "") || (n > 1 && !strings.HasPrefix(prev, want)) {
					t.Errorf("call %d's anchor %.80q; want the previous call's summary (%q)", n, prev, want)
				}
				calls, outs := ids(callMarker, tr), ids(outMarker, tr)
				if !slices.Equal(calls, outs) {
					t.Errorf("call %d splits a turn: tool calls %v, results %v", n, calls, outs)
				}
				read = append(read, reqMarker.FindAllString(tr, -1)...)
			}
			var want []string
			for i := range int(resp.GetPlan().GetCutIndex()) {
				if m := reqMarker.FindString(msgs[i].GetParts()[0].GetText().GetText()); m != "" && msgs[i].GetRole() == compactorv1.Role_ROLE_USER {
					want = append(want, m)
				}
			}
			if !slices.Equal(read, want) {
				t.Errorf("the calls read the requests %v; want each of the range once, in order: %v", read, want)
			}
			if s := resp.GetSummary(); !strings.HasPrefix(s.GetText(), fmt.Sprintf("CHUNK-%d read", calls)) || int(s.GetRequestsTotal()) != len(want) {
				t.Errorf("summary %.80q, check of %d requests; want the last call's, checked against the whole range of %d requests",
					s.GetText(), s.GetRequestsTotal(), len(want))
			}
			if got := serverSpanInt(exp, "compactor.summary.chunks"); got != int64(calls) {
				t.Errorf("server span compactor.summary.chunks = %d, want %d", got, calls)
			}
		})
	}
}

// ids returns the call ids re's first group finds in s, sorted.
func ids(re *regexp.Regexp, s string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return out
}

// serverSpanInt is the int attribute key of the Compact server span, or -1.
func serverSpanInt(exp *tracetest.InMemoryExporter, key string) int64 {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, sp := range exp.GetSpans() {
			if !strings.HasSuffix(sp.Name, "/Compact") {
				continue
			}
			for _, kv := range sp.Attributes {
				if string(kv.Key) == key {
					return kv.Value.AsInt64()
				}
			}
		}
	}
	return -1
}

// TestCompactReusesCachedChunks: each chunk's summary is cached under its prefix, so a
// Compact retried after a chunk failed resumes after the last chunk that was written, and a
// longer prefix summarizes only what is new.
func TestCompactReusesCachedChunks(t *testing.T) {
	llm := chunkingOpenAI(t)
	msgs := irtest.Conversation(40)

	// How many calls the range takes from the start.
	cold := startReplica(t, replicaConfig{llm: llm, maxInput: chunkBound, cache: cache.NewMemory(cache.MemoryOptions{})})
	if _, err := cold.Compact(t.Context(), compactReq(msgs)); err != nil {
		t.Fatal(err)
	}
	chunks := llm.Calls()

	// The third chunk fails (two attempts); the retry resumes after the second.
	client := startReplica(t, replicaConfig{llm: llm, maxInput: chunkBound, cache: cache.NewMemory(cache.MemoryOptions{}),
		retry: summarize.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}})
	first := llm.Calls()
	llm.ScriptPrompt(func(n int64, prompt string) (int, string) {
		if n-first == 3 || n-first == 4 {
			return http.StatusServiceUnavailable, ""
		}
		return chunkReply(n, prompt)
	}, 0)
	_, err := client.Compact(t.Context(), compactReq(msgs))
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "chunk 3") {
		t.Fatalf("a chunk failing: %v; want UNAVAILABLE naming chunk 3", err)
	}
	before := llm.Calls()
	resp, err := client.Compact(t.Context(), compactReq(msgs))
	if err != nil {
		t.Fatal(err)
	}
	checkCompacted(t, msgs, resp)
	if got := llm.Calls() - before; got != chunks-2 {
		t.Errorf("the retry made %d calls; want %d: the two chunks cached are not summarized again", got, chunks-2)
	}
	if _, prev := transcriptOf(llm.Prompt(int(before) + 1)); !strings.HasPrefix(prev, fmt.Sprintf("CHUNK-%d read", first+2)) {
		t.Errorf("the retry's first call is anchored on %.60q, not on the second chunk's summary", prev)
	}

	// A longer prefix: only its new turns are summarized, on top of what is cached.
	longer := irtest.Conversation(43)
	before = llm.Calls()
	resp, err = client.Compact(t.Context(), compactReq(longer))
	if err != nil {
		t.Fatal(err)
	}
	checkCompacted(t, longer, resp)
	if got := llm.Calls() - before; got < 1 || got > 2 {
		t.Errorf("a prefix three turns longer took %d calls; want one or two, on top of the cached summary", got)
	}
}

// TestCompactChunkFailureFallsBack: with fallback: extractive, a chunk failing transiently
// (after its retries) has the fallback write the whole summary, which the response's
// warnings and fallback_from report and which is not cached: once the LLM is back the next
// call writes the LLM's, resuming after the chunks it had cached.
func TestCompactChunkFailureFallsBack(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	llm.MaxInput(chunkBound)
	llm.ScriptPrompt(func(n int64, prompt string) (int, string) {
		if n >= 3 {
			return http.StatusInternalServerError, ""
		}
		return chunkReply(n, prompt)
	}, 0)
	client := startReplica(t, replicaConfig{llm: llm, maxInput: chunkBound, fallback: "extractive", cache: cache.NewMemory(cache.MemoryOptions{}),
		retry: summarize.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}})
	msgs := irtest.Conversation(40)
	resp, err := client.Compact(t.Context(), compactReq(msgs))
	if err != nil {
		t.Fatalf("with a fallback, a chunk failing: %v", err)
	}
	checkCompacted(t, msgs, resp)
	if s := resp.GetSummary(); s.GetSummarizer() != "extractive" || s.GetFallbackFrom() != "llm" || resp.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_BYPASS {
		t.Errorf("summary by %q, fallback_from %q, cache %v; want the extractive fallback's, not cached", s.GetSummarizer(), s.GetFallbackFrom(), resp.GetCacheStatus())
	}
	if w := strings.Join(resp.GetWarnings(), "\n"); !strings.Contains(w, "chunk 3") || !strings.Contains(w, "not cached") || !strings.Contains(w, "extractive") {
		t.Errorf("warnings %q do not say chunk 3 failed and the uncached fallback wrote the summary", w)
	}
	if got := llm.Calls(); got != 4 {
		t.Errorf("%d calls; want two chunks, then the third's two attempts", got)
	}

	llm.ScriptPrompt(chunkReply, 0)
	again, err := client.Compact(t.Context(), compactReq(msgs))
	// The only warnings: one per request the summary reports dropped (requests_dropped).
	if err != nil || again.GetSummary().GetSummarizer() != "llm" || again.GetSummary().GetFallbackFrom() != "" ||
		len(again.GetWarnings()) != len(again.GetSummary().GetRequestsDropped()) {
		t.Fatalf("once the LLM is back: %v, summary by %q, warnings %q; want the LLM's, the fallback's not cached",
			err, again.GetSummary().GetSummarizer(), again.GetWarnings())
	}
	if _, prev := transcriptOf(llm.Prompt(5)); !strings.HasPrefix(prev, "CHUNK-2 read") {
		t.Errorf("once back, the first call is anchored on %.60q; want the second chunk's cached summary", prev)
	}
}

// millionTokens builds an agent session of turns (a request, a long assistant note, a tool
// call and its output, an answer) that comes to about 5,900 o200k tokens a turn, every text
// distinct.
func millionTokens(turns int) []*compactorv1.Message {
	words := strings.Fields("the build runs each module test and the agent reads its output before it edits the parser lexer cache index for the next step")
	note := func(i int) string {
		var b strings.Builder
		for k := 0; b.Len() < 16000; k++ {
			fmt.Fprintf(&b, "%s %s %d. ", words[(i+k)%len(words)], words[(i*7+k*3)%len(words)], i*1000+k)
		}
		return b.String()
	}
	msgs := []*compactorv1.Message{irtest.Msg(compactorv1.Role_ROLE_SYSTEM, irtest.Text("You are a careful coding agent."))}
	for i := range turns {
		id := fmt.Sprintf("call_%04d", i)
		msgs = append(msgs,
			irtest.User(fmt.Sprintf("req-%04d: fix module m%04d.go", i, i)),
			irtest.Assistant(note(i), irtest.Call(id, "read_file", fmt.Sprintf(`{"path":"m%04d.go"}`, i))),
			irtest.Result(id, "read_file", irtest.OutText(note(i + 1)[:1900])),
			irtest.Assistant(fmt.Sprintf("ans-%04d: fixed m%04d.go.", i, i)),
		)
	}
	return msgs
}

// TestCompactMillionTokenRange: a range of a million tokens, summarized with a summarizer of
// max_input_tokens 100,000 (OpenAI protocol, a fake that answers at once): the LLM writes it
// (no fallback), in as many calls as the range needs, none over the bound (the fake fails the
// test otherwise), and every request of the range is in the summary (through the summary
// check) or kept verbatim after it. The figures go to docs/PERFORMANCE.md (go test -v prints them).
func TestCompactMillionTokenRange(t *testing.T) {
	const bound = 100_000
	llm := llmtest.NewOpenAI(t)
	llm.MaxInput(bound)
	llm.ScriptPrompt(func(n int64, _ string) (int, string) {
		return 0, fmt.Sprintf("CHUNK-%d: the agent fixed the modules.", n)
	}, 0)
	client := startReplica(t, replicaConfig{llm: llm, maxInput: bound, cache: cache.NewMemory(cache.MemoryOptions{})})
	msgs := millionTokens(175)
	req := compactReq(msgs)
	req.Policy = &compactorv1.Policy{ContextWindow: 1_100_000, TargetRatio: 0.05, KeepRecentTokens: 20_000, SummaryMaxTokens: 8000,
		Prune: &compactorv1.PrunePolicy{Disabled: true}}
	start := time.Now()
	resp, err := client.Compact(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	cut := int(resp.GetPlan().GetCutIndex())
	var summarized int64
	for i := 1; i < cut; i++ {
		summarized += resp.GetPlan().GetMessageTokens()[i]
	}
	if summarized < 1_000_000 {
		t.Fatalf("the range before the cut has %d tokens; want a million", summarized)
	}
	kept := map[string]bool{}
	for _, m := range resp.GetMessages() {
		if m.GetRole() == compactorv1.Role_ROLE_USER {
			kept[m.GetParts()[0].GetText().GetText()] = true
		}
	}
	s, missing := resp.GetSummary(), 0
	for i := 1; i < cut; i++ {
		if text := msgs[i].GetParts()[0].GetText().GetText(); msgs[i].GetRole() == compactorv1.Role_ROLE_USER && !kept[text] && !strings.Contains(s.GetText(), text) {
			missing++
		}
	}
	if calls := llm.Calls(); s.GetSummarizer() != "llm" || s.GetFallbackFrom() != "" || calls < int64(summarized/bound)+1 {
		t.Errorf("summary by %q (fallback from %q) in %d calls; want the LLM's, in at least %d calls of at most %d tokens",
			s.GetSummarizer(), s.GetFallbackFrom(), calls, summarized/bound+1, bound)
	}
	if missing > 0 || s.GetRequestsRetained()+s.GetRequestsAppended() != s.GetRequestsTotal() {
		t.Errorf("%d requests of the range are neither in the summary nor kept after it (check: %d of %d retained, %d appended)",
			missing, s.GetRequestsRetained(), s.GetRequestsTotal(), s.GetRequestsAppended())
	}
	t.Logf("range %d tokens (%d messages): %d calls, the largest %d input tokens (bound %d), Compact %v",
		summarized, cut-1, llm.Calls(), llm.Largest(), bound, took.Round(time.Millisecond))
}

// TestCompactChunksAreAdmittedEach: every chunk's call is admitted under the tenant's token
// budget with an estimate that covers what it reads (at least the input tokens the provider
// reports less the prompt's own text), and charged what it spent; a budget that runs out
// midway refuses the summary with RESOURCE_EXHAUSTED.
func TestCompactChunksAreAdmittedEach(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	llm.MaxInput(chunkBound)
	rec := &recordingSummaryAdmitter{}
	client := startReplica(t, replicaConfig{llm: llm, maxInput: chunkBound, cache: cache.NewMemory(cache.MemoryOptions{}), admit: rec})
	if _, err := client.Compact(t.Context(), compactReq(irtest.Conversation(40))); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	if calls := int(llm.Calls()); calls < 3 || len(rec.estimates) != calls || len(rec.spent) != calls {
		t.Errorf("%d calls, %d admitted, %d charged; want each chunk's call admitted and charged", calls, len(rec.estimates), len(rec.spent))
	}
	for i, e := range rec.estimates {
		if e < chunkBound/2 || e > 2*chunkBound {
			t.Errorf("call %d admitted for %d tokens; want about what one call under the bound of %d reads", i+1, e, chunkBound)
		}
	}
	rec.mu.Unlock()

	enf := limit.New(limit.Config{Default: limit.Quota{SummarizerTokens: 3 * chunkBound, TokenWindow: time.Hour}}, limit.Options{})
	limited := startReplica(t, replicaConfig{llm: llm, maxInput: chunkBound, cache: cache.NewMemory(cache.MemoryOptions{}), admit: limit.Admission{Enforcer: enf}})
	before := llm.Calls()
	_, err := limited.Compact(t.Context(), compactReq(irtest.Conversation(40)))
	if !quotaRefusal(err, limit.SummarizerTokens) || llm.Calls()-before >= 4 {
		t.Errorf("a budget of three calls' tokens: %v after %d calls; want RESOURCE_EXHAUSTED naming %s before the fourth", err, llm.Calls()-before, limit.SummarizerTokens)
	}
}

// TestCompactResumesFarFromTheCut: chunks end, when they can, at prefixes the lookup tries
// beyond its latest 256, so a Compact retried after a chunk failed hundreds of messages
// before the cut still resumes after the last chunk written.
func TestCompactResumesFarFromTheCut(t *testing.T) {
	llm := chunkingOpenAI(t)
	msgs := irtest.Conversation(120)
	cold := startReplica(t, replicaConfig{llm: llm, maxInput: chunkBound, cache: cache.NewMemory(cache.MemoryOptions{})})
	resp, err := cold.Compact(t.Context(), compactReq(msgs))
	if err != nil {
		t.Fatal(err)
	}
	chunks := llm.Calls()
	// The fourth chunk must end more than 256 messages before the cut.
	if tr, _ := transcriptOf(llm.Prompt(5)); !strings.Contains(tr, "req-") || int(resp.GetPlan().GetCutIndex())-4*(len(msgs)/int(chunks)) < 300 {
		t.Fatalf("%d chunks for a cut at %d: the test needs smaller chunks", chunks, resp.GetPlan().GetCutIndex())
	}

	client := startReplica(t, replicaConfig{llm: llm, maxInput: chunkBound, cache: cache.NewMemory(cache.MemoryOptions{}),
		retry: summarize.RetryPolicy{MaxAttempts: 1}})
	first := llm.Calls()
	llm.ScriptPrompt(func(n int64, prompt string) (int, string) {
		if n-first == 5 {
			return http.StatusServiceUnavailable, ""
		}
		return chunkReply(n, prompt)
	}, 0)
	if _, err := client.Compact(t.Context(), compactReq(msgs)); status.Code(err) != codes.Unavailable {
		t.Fatalf("the fifth chunk failing: %v; want UNAVAILABLE", err)
	}
	before := llm.Calls()
	if _, err := client.Compact(t.Context(), compactReq(msgs)); err != nil {
		t.Fatal(err)
	}
	if got := llm.Calls() - before; got != chunks-4 {
		t.Errorf("the retry made %d calls; want %d: the four chunks cached are not summarized again", got, chunks-4)
	}
}

// chunkingOpenAI is an OpenAI fake that refuses a prompt over chunkBound and answers every
// chunk with chunkReply.
func chunkingOpenAI(t *testing.T) *llmtest.Server {
	llm := llmtest.NewOpenAI(t)
	llm.MaxInput(chunkBound)
	llm.ScriptPrompt(chunkReply, 0)
	return llm
}

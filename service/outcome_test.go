package service_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/internal/llmtest"
	"github.com/compactord/compactord/limit"
	"github.com/compactord/compactord/metrics"
	"github.com/compactord/compactord/summarize"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// cacheOutcomes returns compactord_cache_lookups_total by result.
func cacheOutcomes(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "compactord_cache_lookups_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && m.GetCounter().GetValue() > 0 {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// TestCompactBypass: a summary served and not stored, although the cache answered, is
// reported BYPASS, in the response and in the metrics: the summary of a fallback summarizer.
// A compaction's own summary of a prefix whose cached summary does not serve it (it left out
// requests this compaction does not keep, or it is longer than this compaction's summary
// room) is stored beside it for the compactions like it (MISS, then HIT, with no summarizer
// call), and the cached one stays for the compactions it serves.
func TestCompactBypass(t *testing.T) {
	reg := prometheus.NewRegistry()
	llm := llmtest.NewOpenAI(t)
	client := startReplica(t, replicaConfig{llm: llm, cache: cache.NewMemory(cache.MemoryOptions{}), metrics: metrics.New(reg),
		fallback: "extractive", retry: summarize.RetryPolicy{MaxAttempts: 1, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}})
	want := map[string]float64{}
	compact := func(req *compactorv1.CompactRequest, st compactorv1.CacheStatus) *compactorv1.CompactResponse {
		t.Helper()
		resp, err := client.Compact(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		checkCompacted(t, req.GetMessages(), resp)
		if resp.GetCacheStatus() != st {
			t.Errorf("cache status %v, want %v", resp.GetCacheStatus(), st)
		}
		// The summary the response reports is the one the conversation holds.
		if txt := resp.GetMessages()[1].GetParts()[0].GetText().GetText(); !strings.Contains(txt, resp.GetSummary().GetText()) {
			t.Errorf("the summary message does not hold the summary the response reports (%d bytes)", len(resp.GetSummary().GetText()))
		}
		want[strings.ToLower(strings.TrimPrefix(st.String(), "CACHE_STATUS_"))]++
		return resp
	}

	// A fallback summary.
	llm.Script(func(int64) (int, string) { return http.StatusServiceUnavailable, "" }, 0)
	fell := compact(compactReq(irtest.Conversation(20)), compactorv1.CacheStatus_CACHE_STATUS_BYPASS)
	if fell.GetSummary().GetFallbackFrom() != "llm" {
		t.Errorf("fallback_from %q, want llm", fell.GetSummary().GetFallbackFrom())
	}
	// A summary as long as the room allows.
	llm.Script(func(int64) (int, string) {
		return 0, strings.Repeat("the agent edited m07.go and ran the tests again. ", 400)
	}, 0)
	// A target as high as the trigger: the cut is where the tail budget puts it, whatever the
	// requests kept verbatim and the summary room cost, so the compactions below cut the same
	// prefix.
	highTarget := func() *compactorv1.CompactRequest {
		req := compactReq(irtest.Conversation(20))
		req.Policy.TargetRatio = engine.DefaultTriggerRatio
		return req
	}
	first := compact(highTarget(), compactorv1.CacheStatus_CACHE_STATUS_MISS)

	// The cached summary left out requests this compaction does not keep.
	newest := highTarget()
	newest.Policy.KeepUserMessagesTokens = -1
	folded := compact(newest, compactorv1.CacheStatus_CACHE_STATUS_MISS)
	if folded.GetPlan().GetCutIndex() != first.GetPlan().GetCutIndex() || folded.GetSummary().GetText() == first.GetSummary().GetText() {
		t.Fatalf("cut %d, then %d: the test needs the same prefix, summarized anew", first.GetPlan().GetCutIndex(), folded.GetPlan().GetCutIndex())
	}

	// The cached summary is longer than this compaction's summary room.
	small := highTarget()
	small.Policy.SummaryMaxTokens = 500
	shorter := compact(small, compactorv1.CacheStatus_CACHE_STATUS_MISS)
	if shorter.GetPlan().GetCutIndex() != first.GetPlan().GetCutIndex() || len(shorter.GetSummary().GetText()) >= len(first.GetSummary().GetText()) {
		t.Fatalf("cut %d, summary of %d bytes, then cut %d, %d bytes: the test needs the same prefix, summarized shorter",
			first.GetPlan().GetCutIndex(), len(first.GetSummary().GetText()), shorter.GetPlan().GetCutIndex(), len(shorter.GetSummary().GetText()))
	}

	// Neither replaced the stored summary, and each is served again from the cache, without
	// writing it again.
	calls := llm.Calls()
	again := compact(highTarget(), compactorv1.CacheStatus_CACHE_STATUS_HIT)
	if again.GetSummary().GetText() != first.GetSummary().GetText() || llm.Calls() != calls {
		t.Errorf("the first compaction's summary was not served from the cache as it was stored")
	}
	if f := compact(newest, compactorv1.CacheStatus_CACHE_STATUS_HIT); f.GetSummary().GetText() != folded.GetSummary().GetText() {
		t.Errorf("the summary written for the requests kept was not served again as it was stored")
	}
	if s := compact(small, compactorv1.CacheStatus_CACHE_STATUS_HIT); s.GetSummary().GetText() != shorter.GetSummary().GetText() {
		t.Errorf("the summary written for the smaller room was not served again as it was stored")
	}
	if llm.Calls() != calls {
		t.Errorf("%d summarizer calls for compactions whose summaries are cached", llm.Calls()-calls)
	}
	if got := cacheOutcomes(t, reg); !equalCounts(got, want) {
		t.Errorf("compactord_cache_lookups_total %v, want the responses' %v", got, want)
	}
}

func equalCounts(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestCompactJoinersOfAFailedSummary: a Compact that joins the summarization another call
// of this replica started gets what that call gets, its failure included (never a HIT): a
// refused or failing summarizer fails both after one model call; with a fallback, both are
// served the fallback's summary, BYPASS, and nothing is stored.
func TestCompactJoinersOfAFailedSummary(t *testing.T) {
	for _, tt := range []struct {
		name     string
		status   int
		fallback string
		want     codes.Code
	}{
		{"rejected", http.StatusUnauthorized, "", codes.FailedPrecondition},
		{"unavailable", http.StatusServiceUnavailable, "", codes.Unavailable},
		{"unavailable with a fallback", http.StatusServiceUnavailable, "extractive", codes.OK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			llm := llmtest.NewOpenAI(t)
			llm.Script(func(int64) (int, string) { return tt.status, "" }, 0)
			arrived, release := llm.Hold()
			defer release()
			calls := &countingAdmitter{Shedder: limit.NewShedder(limit.ShedOptions{MaxCPU: 4, MaxLLM: 4})}
			client := startReplica(t, replicaConfig{llm: llm, calls: calls, cache: cache.NewMemory(cache.MemoryOptions{}),
				admit: limit.Admission{Shedder: calls.Shedder}, fallback: tt.fallback,
				retry: summarize.RetryPolicy{MaxAttempts: 1, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}})
			req := compactReq(irtest.Conversation(20))
			type result struct {
				resp *compactorv1.CompactResponse
				err  error
			}
			done := make(chan result, 2)
			compact := func() {
				resp, err := client.Compact(t.Context(), req)
				done <- result{resp, err}
			}
			go compact()
			<-arrived // the leader waits on its model
			go compact()
			// The second call joined: it waits for the leader's summary, its slot given back.
			if !eventually(func() bool { return calls.admitted.Load() == 2 && calls.held.Load() == 0 }) {
				t.Fatalf("%d calls admitted, %d slots held, want 2 and 0", calls.admitted.Load(), calls.held.Load())
			}
			release()
			for range 2 {
				r := <-done
				if status.Code(r.err) != tt.want {
					t.Errorf("Compact = %v, want %v", r.err, tt.want)
				}
				if r.err == nil && (r.resp.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_BYPASS || r.resp.GetSummary().GetFallbackFrom() != "llm") {
					t.Errorf("cache status %v, fallback_from %q; want the fallback's summary, BYPASS", r.resp.GetCacheStatus(), r.resp.GetSummary().GetFallbackFrom())
				}
			}
			if n := llm.Calls(); n != 1 {
				t.Errorf("%d LLM calls, want 1", n)
			}
			// Nothing was stored: a healthy model is asked.
			llm.Script(nil, 0)
			resp, err := client.Compact(t.Context(), req)
			if err != nil || resp.GetCacheStatus() != compactorv1.CacheStatus_CACHE_STATUS_MISS || llm.Calls() != 2 {
				t.Errorf("after the failure: %v, %v, %d LLM calls; want a fresh MISS", resp.GetCacheStatus(), err, llm.Calls())
			}
		})
	}
}

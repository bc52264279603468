package service

import (
	"strings"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/summary"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestCacheStatusProto: every cache outcome has the API value of its name, and every API
// value but UNSPECIFIED is one outcome's.
func TestCacheStatusProto(t *testing.T) {
	seen := map[compactorv1.CacheStatus]cache.Status{}
	for _, s := range cache.Statuses() {
		p := cacheStatusProto(s)
		if want := "CACHE_STATUS_" + strings.ToUpper(s.String()); p.String() != want {
			t.Errorf("%v is %v, want %s", s, p, want)
		}
		if other, ok := seen[p]; ok {
			t.Errorf("%v and %v are both %v", s, other, p)
		}
		seen[p] = s
	}
	for v, name := range compactorv1.CacheStatus_name {
		if _, ok := seen[compactorv1.CacheStatus(v)]; !ok && v != 0 {
			t.Errorf("no cache outcome is %s", name)
		}
	}
	if p := cacheStatusProto(0); p != compactorv1.CacheStatus_CACHE_STATUS_UNSPECIFIED {
		t.Errorf("no outcome is %v", p)
	}
}

// TestSummaryProto: the API's Summary is the entry's, every field of it set from the entry or
// the call, so a field added to the API is not forgotten here.
func TestSummaryProto(t *testing.T) {
	e := &cache.Entry{
		Output: summary.Output{Text: "text", Model: "gpt", PromptVersion: "v2", InputTokens: 100, OutputTokens: 20,
			CacheReadTokens: 60, CacheWriteTokens: 30, Cost: 0.25},
		Summarizer: "mini", CoveredMessages: 9, Kept: []int32{3}, Created: time.Unix(1700000000, 0),
		Check: summary.Check{RequestsTotal: 1, RequestsRetained: 2, RequestsAppended: 3, PathsTotal: 4, PathsRetained: 5, PathsAppended: 6, Trimmed: true,
			RequestsDropped: []int{2}, DroppedMessages: []int{8}},
	}
	got := summaryProto(e, 7, "llm")
	want := &compactorv1.Summary{Text: "text", Summarizer: "mini", Model: "gpt", PromptVersion: "v2", InputTokens: 100, OutputTokens: 20,
		CoveredMessages: 9, RequestsTotal: 1, RequestsRetained: 2, RequestsAppended: 3, PathsTotal: 4, PathsRetained: 5, PathsAppended: 6,
		CheckTrimmed: true, RequestsDropped: []int32{2}, RequestsKeptVerbatim: 7, FallbackFrom: "llm", CacheReadInputTokens: 60, CacheCreationInputTokens: 30, EstimatedCost: 0.25}
	if got.String() != want.String() {
		t.Errorf("summaryProto = %v\nwant %v", got, want)
	}
	fields := got.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); !got.ProtoReflect().Has(f) {
			t.Errorf("Summary.%s is not set from the entry", f.Name())
		}
	}
	attrs := map[string]bool{}
	for _, kv := range checkAttributes(e.Check) {
		attrs[string(kv.Key)] = true
	}
	// One span attribute per check field (the check's Summary fields less their prefix).
	for i := range fields.Len() {
		if name := checkField(fields.Get(i)); name != "" && !attrs["compactor.check."+name] {
			t.Errorf("no span attribute compactor.check.%s for Summary.%s", name, fields.Get(i).Name())
		}
	}
}

// checkField is the span attribute name (after "compactor.check.") of a Summary field that
// reports the check, or "".
func checkField(f protoreflect.FieldDescriptor) string {
	switch n := string(f.Name()); {
	case n == "check_trimmed":
		return "trimmed"
	case strings.HasPrefix(n, "requests_") && n != "requests_kept_verbatim", strings.HasPrefix(n, "paths_"):
		kind, what, _ := strings.Cut(n, "_")
		return kind + "." + what
	}
	return ""
}

package service_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/service"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// startSourced serves a Server with the extractive summarizer keeping its sources in src on
// a real loopback port, and returns a client.
func startSourced(t *testing.T, o service.Options) compactorv1.CompactorServiceClient {
	t.Helper()
	_, conn := serveTCP(t, service.New(o), service.GRPCOptions{})
	return compactorv1.NewCompactorServiceClient(conn)
}

// asTenant is ctx calling as tenant.
func asTenant(ctx context.Context, tenant string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, service.TenantMetadataKey, tenant)
}

// expandAll reads every page of the source hash names, pageSize messages at most each.
func expandAll(t *testing.T, ctx context.Context, client compactorv1.CompactorServiceClient, req *compactorv1.ExpandRequest) ([]*compactorv1.Message, int) {
	t.Helper()
	var out []*compactorv1.Message
	pages := 0
	for {
		resp, err := client.Expand(ctx, req)
		if err != nil {
			t.Fatalf("expand page %d: %v", pages, err)
		}
		pages++
		out = append(out, resp.GetMessages()...)
		if resp.GetNextPageToken() == "" {
			return out, pages
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

// sameBytes fails t unless got and want encode to the same bytes, message by message.
func sameBytes(t *testing.T, what string, got, want []*compactorv1.Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d messages, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, _ := got[i].MarshalVT()
		w, _ := want[i].MarshalVT()
		if !bytes.Equal(g, w) {
			t.Fatalf("%s: message %d differs from the original", what, i)
		}
	}
}

// TestExpandUndoesACompaction: a corpus conversation compacted, the whole source expanded
// page by page is the conversation as it was sent, byte for byte; the summary message names
// its source, and expanding it returns the range it covers.
func TestExpandUndoesACompaction(t *testing.T) {
	client := startSourced(t, service.Options{})
	for _, f := range corpus.Files(t)[:6] {
		t.Run(f.Name, func(t *testing.T) {
			msgs := liftCorpus(t, client, f.Name)
			resp, err := client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: msgs, Force: true,
				Policy: &compactorv1.Policy{ContextWindow: 200000, KeepRecentTurns: 1, KeepRecentTokens: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if !resp.GetCompacted() {
				t.Skipf("not compacted: %s", resp.GetReason())
			}
			hash := resp.GetSourceHash()
			if len(hash) != 64 {
				t.Fatalf("source_hash %q", hash)
			}
			got, pages := expandAll(t, t.Context(), client, &compactorv1.ExpandRequest{SourceHash: hash, PageSize: 7})
			sameBytes(t, "the whole source", got, msgs)
			if want := (len(msgs) + 6) / 7; pages != want {
				t.Errorf("%d pages of 7 for %d messages, want %d", pages, len(msgs), want)
			}

			var sm *compactorv1.Message
			for _, m := range resp.GetMessages() {
				if m.GetKind() == compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
					sm = m
				}
			}
			h, r, ok := engine.ParseSourceMarker(sm.GetParts()[0].GetText().GetText())
			if !ok || h != hash || r.Last != int(resp.GetPlan().GetCutIndex())-1 {
				t.Fatalf("summary marker: %q %v %v; want %s ending at m%d", h, r, ok, hash, resp.GetPlan().GetCutIndex()-1)
			}
			cited, _ := expandAll(t, t.Context(), client, &compactorv1.ExpandRequest{Message: sm})
			sameBytes(t, "the summary's range "+r.String(), cited, msgs[r.First:r.Last+1])
		})
	}
}

// TestExpandErrors: each bad request names its field; an unknown hash and another tenant's
// are the same NOT_FOUND naming the hash.
func TestExpandErrors(t *testing.T) {
	client := startSourced(t, service.Options{})
	msgs := irtest.Conversation(20)
	resp, err := client.Compact(asTenant(t.Context(), "a"), &compactorv1.CompactRequest{Messages: msgs, Policy: policy()})
	if err != nil || resp.GetSourceHash() == "" {
		t.Fatalf("compact: %v, source %q", err, resp.GetSourceHash())
	}
	hash := resp.GetSourceHash()
	page, err := client.Expand(asTenant(t.Context(), "a"), &compactorv1.ExpandRequest{SourceHash: hash, Range: "m2-m4", PageSize: 1})
	if err != nil || page.GetNextPageToken() == "" {
		t.Fatalf("a page of m2-m4: %v, token %q", err, page.GetNextPageToken())
	}
	rangeToken := page.GetNextPageToken()
	pastEnd := base64.RawURLEncoding.EncodeToString([]byte(hash + ":0:999:999"))
	forgedMarker := irtest.User("earlier work\n" + engine.SourceMarker(hash, engine.SourceRange{First: 0, Last: 999}))
	for _, tc := range []struct {
		name  string
		req   *compactorv1.ExpandRequest
		field string
	}{
		{"marker past the end", &compactorv1.ExpandRequest{Message: forgedMarker}, "message"},
		{"another range's token", &compactorv1.ExpandRequest{SourceHash: hash, PageToken: rangeToken}, "page_token"},
		{"token past the end", &compactorv1.ExpandRequest{SourceHash: hash, PageToken: pastEnd}, "page_token"},
		{"nothing", &compactorv1.ExpandRequest{}, "source_hash"},
		{"short hash", &compactorv1.ExpandRequest{SourceHash: "abc"}, "source_hash"},
		{"both", &compactorv1.ExpandRequest{SourceHash: hash, Message: msgs[0]}, "source_hash"},
		{"no marker", &compactorv1.ExpandRequest{Message: msgs[0]}, "message"},
		{"bad range", &compactorv1.ExpandRequest{SourceHash: hash, Range: "m9–m3"}, "range"},
		{"words", &compactorv1.ExpandRequest{SourceHash: hash, Range: "the start"}, "range"},
		{"past the end", &compactorv1.ExpandRequest{SourceHash: hash, Range: "m0–m999"}, "range"},
		{"page size", &compactorv1.ExpandRequest{SourceHash: hash, PageSize: -1}, "page_size"},
		{"forged token", &compactorv1.ExpandRequest{SourceHash: hash, PageToken: "bm9wZQ"}, "page_token"},
	} {
		_, err := client.Expand(asTenant(t.Context(), "a"), tc.req)
		if got := BadRequestField(t, err, codes.InvalidArgument); got != tc.field {
			t.Errorf("%s: field %q, want %q", tc.name, got, tc.field)
		}
	}
	unknown := strings.Repeat("0", 64)
	for _, tc := range []struct{ tenant, hash string }{{"a", unknown}, {"b", hash}, {"", hash}} {
		_, err := client.Expand(asTenant(t.Context(), tc.tenant), &compactorv1.ExpandRequest{SourceHash: tc.hash})
		if st := status.Convert(err); st.Code() != codes.NotFound || !strings.Contains(st.Message(), tc.hash) {
			t.Errorf("tenant %q, hash %.8s: %v; want NOT_FOUND naming the hash", tc.tenant, tc.hash, err)
		}
	}
	if _, err := client.Expand(asTenant(t.Context(), "a"), &compactorv1.ExpandRequest{SourceHash: hash, Range: "m2-m4"}); err != nil {
		t.Errorf("tenant a, its own source: %v", err)
	}
	// A citation of an earlier source that no summary in this one names is NOT_FOUND naming
	// its prefix.
	_, err = client.Expand(asTenant(t.Context(), "a"), &compactorv1.ExpandRequest{SourceHash: hash, Range: "[s0badcafe m1–2]"})
	if st := status.Convert(err); st.Code() != codes.NotFound || !strings.Contains(st.Message(), "s0badcafe") {
		t.Errorf("an unknown earlier source: %v; want NOT_FOUND naming s0badcafe", err)
	}
}

// TestExpandAfterTTLIsNotFound: a source whose TTL ended is NOT_FOUND, as one never kept.
func TestExpandAfterTTLIsNotFound(t *testing.T) {
	now := time.Now()
	src := cache.NewMemorySources(cache.MemorySourcesOptions{TTL: time.Hour, Now: func() time.Time { return now }})
	client := startSourced(t, service.Options{Sources: src})
	resp, err := client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: irtest.Conversation(20), Policy: policy()})
	if err != nil {
		t.Fatal(err)
	}
	req := &compactorv1.ExpandRequest{SourceHash: resp.GetSourceHash()}
	if _, err := client.Expand(t.Context(), req); err != nil {
		t.Fatalf("within the TTL: %v", err)
	}
	now = now.Add(time.Hour)
	if _, err := client.Expand(t.Context(), req); status.Code(err) != codes.NotFound {
		t.Errorf("after the TTL: %v, want NOT_FOUND", err)
	}
}

// TestCompactSourceBudget: a tenant's sources past its budget fail the compaction with
// RESOURCE_EXHAUSTED naming the budget, other tenants go on, and discard_sources lets the
// tenant compact without keeping one.
func TestCompactSourceBudget(t *testing.T) {
	msgs := irtest.Conversation(20)
	size := 0
	for _, m := range msgs {
		size += m.SizeVT() + 4
	}
	src := cache.NewMemorySources(cache.MemorySourcesOptions{Budget: int64(size) * 3 / 2})
	client := startSourced(t, service.Options{Sources: src})
	compact := func(tenant string, n int, discard bool) (*compactorv1.CompactResponse, error) {
		p := policy()
		p.DiscardSources = discard
		return client.Compact(asTenant(t.Context(), tenant), &compactorv1.CompactRequest{Messages: irtest.Conversation(n), Policy: p})
	}
	if _, err := compact("a", 20, false); err != nil {
		t.Fatal(err)
	}
	if _, err := compact("a", 20, false); err != nil {
		t.Fatalf("the same source again costs nothing: %v", err)
	}
	_, err := compact("a", 21, false)
	st := status.Convert(err)
	var quota *errdetails.QuotaFailure
	for _, d := range st.Details() {
		if q, ok := d.(*errdetails.QuotaFailure); ok {
			quota = q
		}
	}
	if st.Code() != codes.ResourceExhausted || quota == nil || quota.GetViolations()[0].GetSubject() != "source-budget" ||
		!strings.Contains(st.Message(), "--source-budget") {
		t.Fatalf("past the budget: %v; want RESOURCE_EXHAUSTED naming source-budget", err)
	}
	if _, err := compact("b", 21, false); err != nil {
		t.Errorf("another tenant: %v", err)
	}
	resp, err := compact("a", 21, true)
	if err != nil || !resp.GetCompacted() || resp.GetSourceHash() != "" {
		t.Fatalf("discard_sources: %v, source %q", err, resp.GetSourceHash())
	}
	for _, m := range resp.GetMessages() {
		if _, _, ok := engine.ParseSourceMarker(m.GetParts()[0].GetText().GetText()); ok {
			t.Errorf("discard_sources: the summary names a source")
		}
	}
}

// TestExpandRedisDown: with the Redis that keeps the sources gone, Expand is UNAVAILABLE with
// RetryInfo, Compact goes on and says the source was not kept, and once Redis is back the
// source kept before is returned whole.
func TestExpandRedisDown(t *testing.T) {
	redisAt, proxy := proxiedRedis(t)
	r := newRedisCache(t, redisAt, nil)
	client := startSourced(t, service.Options{Cache: r, Sources: cache.NewRedisSources(r, time.Hour, 1<<30)})
	msgs := irtest.Conversation(20)
	resp, err := client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: msgs, Policy: policy()})
	if err != nil || resp.GetSourceHash() == "" {
		t.Fatalf("with Redis: %v, source %q", err, resp.GetSourceHash())
	}
	req := &compactorv1.ExpandRequest{SourceHash: resp.GetSourceHash()}

	proxy.Stop()
	_, err = client.Expand(t.Context(), req)
	st := status.Convert(err)
	retry := false
	for _, d := range st.Details() {
		_, ok := d.(*errdetails.RetryInfo)
		retry = retry || ok
	}
	if st.Code() != codes.Unavailable || !retry {
		t.Errorf("Redis down: %v; want UNAVAILABLE with RetryInfo", err)
	}
	down, err := client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: irtest.Conversation(21), Policy: policy()})
	if err != nil || !down.GetCompacted() || down.GetSourceHash() != "" || !strings.Contains(strings.Join(down.GetWarnings(), "\n"), "source could not be kept") {
		t.Errorf("Compact with Redis down: %v, source %q, warnings %q", err, down.GetSourceHash(), down.GetWarnings())
	}

	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	var got []*compactorv1.Message
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		page, err := client.Expand(t.Context(), req)
		if err == nil {
			got = page.GetMessages()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis back: %v", err)
		}
	}
	sameBytes(t, "after the outage", got, msgs)
}

// TestSourceStoresBudgetAcrossReplicas: two Redis source stores of one prefix share each
// tenant's budget.
func TestSourceStoresBudgetAcrossReplicas(t *testing.T) {
	rs := sharedRedis(t, redisURL(t), 2)
	a := cache.NewRedisSources(rs[0].(*cache.Redis), time.Hour, 100)
	b := cache.NewRedisSources(rs[1].(*cache.Redis), time.Hour, 100)
	ref := func(i byte) cache.SourceRef { return cache.NewSourceRef("t", [32]byte{i}) }
	if err := a.PutSource(t.Context(), ref(1), make([]byte, 60)); err != nil {
		t.Fatal(err)
	}
	err := b.PutSource(t.Context(), ref(2), make([]byte, 60))
	var be *cache.BudgetError
	if !errors.As(err, &be) || be.Used != 60 || be.Budget != 100 {
		t.Fatalf("second replica past the shared budget: %v", err)
	}
	if err := b.PutSource(t.Context(), cache.NewSourceRef("u", [32]byte{2}), make([]byte, 60)); err != nil {
		t.Errorf("another tenant: %v", err)
	}
	got, err := b.GetSource(t.Context(), ref(1))
	if err != nil || len(got) != 60 {
		t.Errorf("read on the other replica: %d bytes, %v", len(got), err)
	}
	if _, err := b.GetSource(t.Context(), cache.NewSourceRef("u", [32]byte{1})); !errors.Is(err, cache.ErrNotFound) {
		t.Errorf("another tenant's source: %v, want not found", err)
	}
}

// TestCompactRedisStalledKeepsNoSource: with Redis stalled, the source write gives up at its
// budget and Compact goes on without it, saying so: a command's budget ending is not the
// caller's deadline (the chaos run found Compacts failing DEADLINE_EXCEEDED).
func TestCompactRedisStalledKeepsNoSource(t *testing.T) {
	redisAt, proxy := proxiedRedis(t)
	r, err := cache.NewRedis(cache.RedisOptions{URL: redisAt, Breaker: -1,
		KeyPrefix: fmt.Sprintf("compactord-test:%d:", time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	client := startSourced(t, service.Options{Cache: r, Sources: cache.NewRedisSources(r, time.Hour, 1<<30)})
	if _, err := client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: irtest.Conversation(20), Policy: policy()}); err != nil {
		t.Fatal(err)
	}
	proxy.Stall(true)
	defer proxy.Stall(false)
	resp, err := client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: irtest.Conversation(21), Policy: policy()})
	if err != nil || !resp.GetCompacted() || resp.GetSourceHash() != "" ||
		!strings.Contains(strings.Join(resp.GetWarnings(), "\n"), "source could not be kept") {
		t.Fatalf("Redis stalled: %v, source %q, warnings %q; want compacted without a source", err, resp.GetSourceHash(), resp.GetWarnings())
	}
}

// TestExpandResolvesSummaryCitations: every citation of a summary expands (with the summary
// message) to the original messages it names, byte for byte; after a second compaction that
// builds on the first summary, the citations it carried name the first source by its hash
// prefix ("[s1a2b3c4 m12–18]") and still expand to the first conversation's messages.
func TestExpandResolvesSummaryCitations(t *testing.T) {
	client := startSourced(t, service.Options{})
	policy := &compactorv1.Policy{ContextWindow: 200000, KeepRecentTurns: 1, KeepRecentTokens: 1}
	summaryOf := func(t *testing.T, msgs []*compactorv1.Message) (*compactorv1.CompactResponse, *compactorv1.Message) {
		t.Helper()
		resp, err := client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: msgs, Force: true, Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range resp.GetMessages() {
			if m.GetKind() == compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
				return resp, m
			}
		}
		return resp, nil
	}
	carried := 0
	for _, f := range corpus.Files(t)[:6] {
		t.Run(f.Name, func(t *testing.T) {
			msgs := liftCorpus(t, client, f.Name)
			resp, sm := summaryOf(t, msgs)
			if sm == nil {
				t.Skipf("not compacted: %s", resp.GetReason())
			}
			cites := engine.ParseCitations(engine.SummaryText(sm))
			if len(cites) == 0 {
				t.Fatalf("the summary cites nothing:\n%s", engine.SummaryText(sm))
			}
			for _, c := range cites {
				got, _ := expandAll(t, t.Context(), client, &compactorv1.ExpandRequest{Message: sm, Range: c.String()})
				sameBytes(t, c.String(), got, msgs[c.Range.First:c.Range.Last+1])
			}

			// A second compaction builds on the first summary.
			next := append(resp.GetMessages(), irtest.Assistant("Continuing with the task."), irtest.User("Please go on."),
				irtest.Assistant("Going on."), irtest.User("Thanks, carry on."))
			resp2, sm2 := summaryOf(t, next)
			if sm2 == nil {
				t.Skipf("not compacted again: %s", resp2.GetReason())
			}
			prefix := resp.GetSourceHash()[:engine.SourcePrefixLen]
			for _, c := range engine.ParseCitations(engine.SummaryText(sm2)) {
				switch c.Source {
				case "":
					got, _ := expandAll(t, t.Context(), client, &compactorv1.ExpandRequest{Message: sm2, Range: c.String()})
					sameBytes(t, "second "+c.String(), got, next[c.Range.First:c.Range.Last+1])
				case prefix:
					got, _ := expandAll(t, t.Context(), client, &compactorv1.ExpandRequest{Message: sm2, Range: c.String()})
					sameBytes(t, "carried "+c.String(), got, msgs[c.Range.First:c.Range.Last+1])
					carried++
				default:
					t.Errorf("%s names a source that is neither summary's (%s)", c, prefix)
				}
			}
		})
	}
	if carried == 0 {
		t.Error("no second summary carried a citation of the first")
	}
}

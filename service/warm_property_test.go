package service_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/auth"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/internal/measure"
	"github.com/compactord/compactord/internal/redistest"
	"github.com/compactord/compactord/service"
)

// TestWarmCompactionKeepsWhatColdKeeps is issue 37's promise as a property: what a
// compaction keeps does not depend on what else the summary cache holds. For each session of
// the corpus and of the generator, the conversation up to its last assistant message is
// compacted at 35% of its tokens on an empty cache (cold); then, under another tenant, the
// cache is filled by compacting the same conversation at other windows, summary rooms, cuts
// and instructions, in an order of the session's own (two orders for every fourth), and the
// same request is compacted again (warm). The warm compaction must keep every request and
// standing instruction line the cold one keeps, stand for the same range by the summary check
// (its requests and paths, as many of them held), and keep the same window promise. On the
// embedded cache and on Redis (REDIS_URL, else a redis-server of its own).
func TestWarmCompactionKeepsWhatColdKeeps(t *testing.T) {
	n := 6
	if testing.Short() {
		n = 2
	}
	convs := sessions(t, n)
	t.Run("memory", func(t *testing.T) {
		srv := service.New(service.Options{Cache: cache.NewMemory(cache.MemoryOptions{})})
		warmProperty(t, srv, convs)
	})
	t.Run("redis", func(t *testing.T) {
		url := os.Getenv("REDIS_URL")
		if url == "" {
			redistest.Need(t)
			url = "redis://" + redistest.Start(t, false).Addr + "/0"
		}
		rc, err := cache.NewRedis(cache.RedisOptions{URL: url, KeyPrefix: fmt.Sprintf("warmprop:%d:", time.Now().UnixNano()), Budget: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rc.Close() })
		warmProperty(t, service.New(service.Options{Cache: rc}), convs)
	})
}

// fill is one compaction that fills the cache before a warm one: the conversation cut before
// the assistant message nearest share of its messages, at a window of ratio of its tokens,
// with a summary room of room tokens and keepUser tokens of requests kept verbatim (0: the
// defaults), and instructions.
type fill struct {
	share, ratio   float64
	room, keepUser int64
	instructions   string
}

// fills are the other calls a tenant makes on a conversation: other windows, rooms, requests
// kept, cuts and instructions.
var fills = []fill{
	{1, 0.2, 0, 0, ""}, {1, 0.5, 0, 0, ""}, {1, 0.8, 0, 0, ""}, {1, 0.15, 0, 0, ""},
	{1, 0.35, 300, 0, ""}, {1, 0.35, 6000, 0, ""}, {1, 0.35, 0, 0, "Keep every file path and the failing test names."},
	{1, 0.35, 0, 1 << 16, ""}, {1, 0.35, 0, 64, ""}, {1, 0.35, 600, 1 << 16, ""},
	{0.25, 0.35, 0, 0, ""}, {0.5, 0.35, 0, 0, ""}, {0.75, 0.35, 0, 0, ""}, {0.5, 0.2, 400, 0, ""}, {0.75, 0.6, 0, 1 << 16, ""},
}

// warmProperty runs the property on srv over convs, each run under a tenant of its own.
func warmProperty(t *testing.T, srv *service.Server, convs []session) {
	var compared, hits int
	for k, s := range convs {
		end := measure.AssistantNear(s.msgs, 1)
		if end <= 0 {
			continue
		}
		total := tokensOf(t, srv, s.msgs[:end])
		req := &compactorv1.CompactRequest{Messages: s.msgs[:end], Force: true,
			Policy: &compactorv1.Policy{ContextWindow: max(sessionMinWindow/2, total*35/100)}}
		cold, coldErr := srv.Compact(tenantCtx(t, s.name, "cold"), req)
		orders := 1
		if k%4 == 0 {
			orders = 2
		}
		for o := range orders {
			ctx := tenantCtx(t, s.name, "warm"+strconv.Itoa(o))
			r := rand.New(rand.NewPCG(uint64(k), uint64(o)))
			for _, i := range r.Perm(len(fills)) {
				f := fills[i]
				cut := measure.AssistantNear(s.msgs, f.share)
				if cut <= 0 {
					continue
				}
				policy := &compactorv1.Policy{ContextWindow: max(sessionMinWindow/2, int64(f.ratio*float64(total))), SummaryMaxTokens: f.room, KeepUserMessagesTokens: f.keepUser}
				_, err := srv.Compact(ctx, &compactorv1.CompactRequest{Messages: s.msgs[:cut], Policy: policy, Force: true, Instructions: f.instructions})
				if err != nil && testing.Verbose() {
					t.Logf("%s: fill %+v: %v", s.name, f, err)
				}
			}
			warm, warmErr := srv.Compact(ctx, req)
			name := fmt.Sprintf("%s (window %d), fill order %d", s.name, req.GetPolicy().GetContextWindow(), o)
			if (coldErr == nil) != (warmErr == nil) {
				t.Errorf("%s: cold %v, warm %v", name, coldErr, warmErr)
				continue
			}
			if coldErr != nil {
				continue
			}
			if warm.GetCacheStatus() == compactorv1.CacheStatus_CACHE_STATUS_HIT {
				hits++
			}
			compared++
			compareWarm(t, srv, name, req, cold, warm)
		}
	}
	t.Logf("%d warm compactions compared with cold ones (%d served from the cache)", compared, hits)
	if compared == 0 || hits == 0 {
		t.Fatalf("%d compared, %d from the cache: the property was not exercised", compared, hits)
	}
}

// compareWarm checks warm against cold, two compactions of req.
func compareWarm(t *testing.T, srv *service.Server, name string, req *compactorv1.CompactRequest, cold, warm *compactorv1.CompactResponse) {
	t.Helper()
	if cold.GetCompacted() != warm.GetCompacted() {
		t.Errorf("%s: cold compacted %v (%s), warm %v (%s)", name, cold.GetCompacted(), cold.GetReason(), warm.GetCompacted(), warm.GetReason())
		return
	}
	if !cold.GetCompacted() {
		return
	}
	msgs := req.GetMessages()
	coldHay := fidelity.NewHaystack(nil, sentMessages(cold.GetMessages()))
	warmHay := fidelity.NewHaystack(nil, sentMessages(warm.GetMessages()))
	coldLost, warmLost := missingRequests(coldHay, msgs), missingRequests(warmHay, msgs)
	for _, l := range warmLost {
		if !slices.Contains(coldLost, l) {
			t.Errorf("%s: warm lost the request %q, which cold keeps (cache %s)", name, clipped(l), warm.GetCacheStatus())
		}
	}
	for _, l := range standingLines(msgs) {
		if coldHay.Has(l) && !warmHay.Has(l) {
			t.Errorf("%s: warm lost the standing instruction line %q, which cold keeps", name, clipped(l))
			break
		}
	}
	c, w := cold.GetSummary(), warm.GetSummary()
	if c.GetRequestsTotal() != w.GetRequestsTotal() || c.GetPathsTotal() != w.GetPathsTotal() {
		t.Errorf("%s: the warm summary was checked against %d requests and %d paths, the cold one against %d and %d (cache %s)",
			name, w.GetRequestsTotal(), w.GetPathsTotal(), c.GetRequestsTotal(), c.GetPathsTotal(), warm.GetCacheStatus())
	}
	if held(w.GetRequestsRetained(), w.GetRequestsAppended()) < held(c.GetRequestsRetained(), c.GetRequestsAppended()) {
		t.Errorf("%s: the warm summary holds %d of its %d requests, the cold one %d (cache %s)", name,
			held(w.GetRequestsRetained(), w.GetRequestsAppended()), w.GetRequestsTotal(), held(c.GetRequestsRetained(), c.GetRequestsAppended()), warm.GetCacheStatus())
	}
	if cp, wp := cold.GetPlan(), warm.GetPlan(); cp.GetTokensAfter() != wp.GetTokensAfter() || cp.GetCutIndex() != wp.GetCutIndex() {
		t.Errorf("%s: warm planned %d tokens after a cut at %d, cold %d at %d", name, wp.GetTokensAfter(), wp.GetCutIndex(), cp.GetTokensAfter(), cp.GetCutIndex())
	}
	checkFits(t, srv, name+", warm", req.GetPolicy(), warm)
}

func held(retained, appended int32) int32 { return retained + appended }

// clipped bounds a line for a failure message.
func clipped(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// tenantCtx is a context whose calls act for a tenant of their own, named after the test,
// the session and run.
func tenantCtx(t *testing.T, session, run string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs(auth.TenantKey, fmt.Sprintf("%x-%s-%s", fnv(t.Name()+session), run, strconv.FormatInt(time.Now().UnixNano()%1e6, 36))))
}

// fnv is the 32-bit FNV-1a hash of s.
func fnv(s string) uint32 {
	h := uint32(2166136261)
	for i := range len(s) {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

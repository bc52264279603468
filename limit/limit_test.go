package limit

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/auth"
	"github.com/compactord/compactord/internal/hold"
	"github.com/compactord/compactord/internal/redistest"
	"github.com/compactord/compactord/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

var compactInfo = &grpc.UnaryServerInfo{FullMethod: servicePrefix + "Compact"}
var planInfo = &grpc.UnaryServerInfo{FullMethod: servicePrefix + "Plan"}

// tenantCtx is an incoming call of tenant (with no authentication, auth.Tenant reads the
// header).
func tenantCtx(tenant string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs(auth.TenantKey, tenant))
}

func ok(context.Context, any) (any, error) { return "ok", nil }

// refusedBy checks err is RESOURCE_EXHAUSTED naming limit in a QuotaFailure, with RetryInfo.
func refusedBy(t *testing.T, err error, limit string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("got %v, want RESOURCE_EXHAUSTED", err)
	}
	var quota, retry bool
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.QuotaFailure:
			quota = len(d.Violations) == 1 && strings.HasPrefix(d.Violations[0].Description, limit+":")
		case *errdetails.RetryInfo:
			retry = d.RetryDelay.AsDuration() > 0
		}
	}
	if !quota || !retry {
		t.Errorf("%v: QuotaFailure naming %s %v, RetryInfo %v", err, limit, quota, retry)
	}
}

// replicas returns two Enforcers sharing one real Redis, as two replicas would.
func replicas(t *testing.T, cfg Config, m *metrics.Recorder) (a, b *Enforcer, rdb *redis.Client) {
	t.Helper()
	redistest.Need(t)
	node := redistest.Start(t, false)
	rdb = redis.NewClient(&redis.Options{Addr: node.Addr})
	t.Cleanup(func() { rdb.Close() })
	return New(cfg, Options{Redis: rdb, Metrics: m}), New(cfg, Options{Redis: rdb, Metrics: m}), rdb
}

func TestCallsPerSecondAcrossReplicas(t *testing.T) {
	cfg := Config{Default: Quota{CallsPerSecond: 1, Burst: 3}, Tenants: map[string]Quota{"big": {CallsPerSecond: 100, Burst: 100}}}
	reg := prometheus.NewRegistry()
	a, b, _ := replicas(t, cfg, metrics.New(reg))
	ia, ib := a.UnaryServerInterceptor(), b.UnaryServerInterceptor()
	ctx := tenantCtx("acme")
	for i, in := range []grpc.UnaryServerInterceptor{ia, ib, ia} {
		if _, err := in(ctx, nil, planInfo, ok); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	_, err := ib(ctx, nil, planInfo, ok)
	refusedBy(t, err, CallsPerSecond)
	// Another tenant has its own budget, and its own limits.
	for range 10 {
		if _, err := ia(tenantCtx("big"), nil, planInfo, ok); err != nil {
			t.Fatalf("tenant big: %v", err)
		}
	}
	// Health and reflection are not CompactorService calls.
	if _, err := ia(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}, ok); err != nil {
		t.Errorf("health: %v", err)
	}
	// acme is not a configured tenant: its refusals count under "other".
	if got := counter(t, reg, "compactord_limit_refusals_total", CallsPerSecond, metrics.OtherTenant); got != 1 {
		t.Errorf("refusals of acme counted as other: %v, want 1", got)
	}
}

func TestConcurrentCompactsAcrossReplicas(t *testing.T) {
	a, b, _ := replicas(t, Config{Default: Quota{ConcurrentCompacts: 1}}, nil)
	ctx := tenantCtx("acme")
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := a.UnaryServerInterceptor()(ctx, nil, compactInfo, func(context.Context, any) (any, error) {
			close(holding)
			<-release
			return "ok", nil
		})
		done <- err
	}()
	<-holding
	_, err := b.UnaryServerInterceptor()(ctx, nil, compactInfo, ok)
	refusedBy(t, err, ConcurrentCompacts)
	// Plan is not a Compact; another tenant is not acme.
	if _, err := b.UnaryServerInterceptor()(ctx, nil, planInfo, ok); err != nil {
		t.Errorf("Plan while acme's Compact runs: %v", err)
	}
	if _, err := b.UnaryServerInterceptor()(tenantCtx("globex"), nil, compactInfo, ok); err != nil {
		t.Errorf("globex while acme's Compact runs: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := b.UnaryServerInterceptor()(ctx, nil, compactInfo, ok); err != nil {
		t.Errorf("after the first Compact finished: %v", err)
	}
}

func TestSummarizerTokensAcrossReplicas(t *testing.T) {
	a, b, _ := replicas(t, Config{Default: Quota{SummarizerTokens: 1000, TokenWindow: time.Hour}}, nil)
	ctx := tenantCtx("acme")
	settle, err := a.ReserveTokens(ctx, "acme", 100)
	if err != nil {
		t.Fatal(err)
	}
	settle(600)
	if settle, err = b.ReserveTokens(ctx, "acme", 100); err != nil {
		t.Fatalf("600 of 1000 spent: %v", err)
	}
	settle(400)
	_, err = a.ReserveTokens(ctx, "acme", 100)
	refusedBy(t, err, SummarizerTokens)
	if _, err := a.ReserveTokens(ctx, "globex", 100); err != nil {
		t.Errorf("another tenant: %v", err)
	}
}

// TestTokenReservations: calls in flight count against the token budget before they
// report, on every replica, and each is charged what it spent in place of its estimate.
func TestTokenReservations(t *testing.T) {
	cfg := Config{Default: Quota{SummarizerTokens: 1000, TokenWindow: time.Hour}}
	for name, pair := range map[string]func(t *testing.T) (a, b *Enforcer){
		"redis": func(t *testing.T) (a, b *Enforcer) { a, b, _ = replicas(t, cfg, nil); return a, b },
		"local": func(*testing.T) (a, b *Enforcer) { e := New(cfg, Options{}); return e, e },
	} {
		t.Run(name, func(t *testing.T) {
			a, b := pair(t)
			ctx := context.Background()
			first, err := a.ReserveTokens(ctx, "acme", 600)
			if err != nil {
				t.Fatal(err)
			}
			second, err := b.ReserveTokens(ctx, "acme", 500) // 600 in flight: admitted
			if err != nil {
				t.Fatal(err)
			}
			_, err = a.ReserveTokens(ctx, "acme", 10) // 1100 in flight: refused
			refusedBy(t, err, SummarizerTokens)
			first(0)                                         // failed without spending
			second(100)                                      // spent less than it might have
			settle, err := b.ReserveTokens(ctx, "acme", 850) // 100 spent
			if err != nil {
				t.Fatalf("after the calls reported 100 spent: %v", err)
			}
			settle(850)
			settle(850)                               // once
			_, err = a.ReserveTokens(ctx, "acme", 10) // 950 spent, 10 in flight: admitted
			if err != nil {
				t.Fatalf("950 of 1000 spent: %v", err)
			}
		})
	}
}

// TestRedisDownFallsBackToLocal: with Redis gone, each replica enforces the limits alone
// and says so in compactord_limit_fallback_total.
func TestRedisDownFallsBackToLocal(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	dead := redis.NewClient(&redis.Options{Addr: closedAddr(t), DialTimeout: 20 * time.Millisecond, MaxRetries: -1})
	defer dead.Close()
	e := New(Config{Default: Quota{CallsPerSecond: 1, Burst: 2, ConcurrentCompacts: 1, SummarizerTokens: 10}},
		Options{Redis: dead, Metrics: m})
	in := e.UnaryServerInterceptor()
	ctx := tenantCtx("acme")
	start := time.Now()
	for range 2 {
		if _, err := in(ctx, nil, planInfo, ok); err != nil {
			t.Fatalf("within the burst: %v", err)
		}
	}
	_, err := in(ctx, nil, planInfo, ok)
	refusedBy(t, err, CallsPerSecond)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("three decisions with Redis down took %v", d)
	}
	settle, err := e.ReserveTokens(ctx, "acme", 1)
	if err != nil {
		t.Fatal(err)
	}
	settle(10)
	_, err = e.ReserveTokens(ctx, "acme", 1)
	refusedBy(t, err, SummarizerTokens)
	if got := counter(t, reg, "compactord_limit_fallback_total", CallsPerSecond); got != 3 {
		t.Errorf("fallback decisions: %v, want 3", got)
	}
}

// admitted admits a call as the service's method handlers do: a hold for the call, and the
// slot in it. It returns the call's context and its end, or the refusal.
func admitted(s *Shedder) (context.Context, func(), error) {
	ctx, end := hold.Start(context.Background())
	release, err := s.AdmitCall(ctx)
	if err != nil {
		end()
		return nil, nil, err
	}
	hold.AddSlot(ctx, release)
	return ctx, end, nil
}

func TestShedder(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := NewShedder(ShedOptions{MaxCPU: 2, MaxLLM: 1, Metrics: metrics.New(reg)})
	_, end1, err1 := admitted(s)
	ctx2, end2, err2 := admitted(s)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	_, _, err := admitted(s)
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), BoundCPU) {
		t.Errorf("a third call at a bound of 2: %v, want UNAVAILABLE naming %s", err, BoundCPU)
	}
	end1() // a call ends: its slot is free
	if len(s.cpu) != 1 {
		t.Fatalf("%d slots taken after a call ended, want 1", len(s.cpu))
	}
	_, end3, err := admitted(s)
	if err != nil {
		t.Fatalf("after a call ended: %v", err)
	}
	// The Compact waits on a model: it gives its cpu slot back and holds an llm slot.
	done, err := s.AdmitLLM(ctx2)
	if err != nil {
		t.Fatal(err)
	}
	_, end4, err := admitted(s)
	if err != nil {
		t.Errorf("cpu work while a Compact waits on its model: %v", err)
	}
	if _, err := s.AdmitLLM(context.Background()); status.Code(err) != codes.Unavailable {
		t.Errorf("a second LLM call at a bound of 1: %v", err)
	}
	done()
	end2() // ending the call after the handover frees nothing twice
	end3()
	end4()
	if len(s.cpu) != 0 || len(s.llm) != 0 {
		t.Errorf("slots still taken: cpu %d, llm %d", len(s.cpu), len(s.llm))
	}
	if got := counter(t, reg, "compactord_shed_total", "cpu"); got != 1 {
		t.Errorf("shed cpu: %v, want 1", got)
	}
	if got := counter(t, reg, "compactord_shed_total", "llm"); got != 1 {
		t.Errorf("shed llm: %v, want 1", got)
	}
}

// TestShedderMemoryBudget: requests' bytes are admitted up to the budget; past it a request
// is refused with RESOURCE_EXHAUSTED naming the budget, with RetryInfo while others hold it,
// without when it alone is larger; released bytes are admitted again.
func TestShedderMemoryBudget(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := NewShedder(ShedOptions{MemoryBytes: 1000, Metrics: metrics.New(reg)})
	a, err := s.AdmitBytes(600)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.AdmitBytes(400)
	if err != nil {
		t.Fatal(err)
	}
	memoryRefused(t, s, 1, true)
	a()
	a() // released once
	if got := s.inUse.Load(); got != 400 {
		t.Errorf("in use after a release: %d, want 400", got)
	}
	c, err := s.AdmitBytes(600)
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	memoryRefused(t, s, 1001, false)
	b()
	c()
	if got := s.inUse.Load(); got != 0 {
		t.Errorf("in use after every release: %d", got)
	}
	if got := counter(t, reg, "compactord_shed_total", "memory"); got != 2 {
		t.Errorf("shed memory: %v, want 2", got)
	}
}

// memoryRefused checks that n bytes are refused with RESOURCE_EXHAUSTED naming the memory
// budget, with RetryInfo when retry.
func memoryRefused(t *testing.T, s *Shedder, n int64, retry bool) {
	t.Helper()
	_, err := s.AdmitBytes(n)
	st := status.Convert(err)
	var named, retryInfo bool
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.QuotaFailure:
			named = strings.HasPrefix(d.Violations[0].Description, MemoryBudget)
		case *errdetails.RetryInfo:
			retryInfo = d.RetryDelay.AsDuration() > 0
		}
	}
	if st.Code() != codes.ResourceExhausted || !named || retryInfo != retry {
		t.Errorf("%d bytes: %v (named %v, RetryInfo %v), want RESOURCE_EXHAUSTED naming %s, RetryInfo %v", n, err, named, retryInfo, MemoryBudget, retry)
	}
}

// counter returns the value of the series of name with the given label values in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, metric := range mf.GetMetric() {
			vals := make([]string, len(metric.GetLabel()))
			for i, lp := range metric.GetLabel() {
				vals[i] = lp.GetValue()
			}
			if strings.Join(vals, ",") == strings.Join(labels, ",") {
				return metric.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func closedAddr(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// TestLocalStateBounded: the local fallback remembers a bounded number of tenants, and a
// finished Compact leaves no entry behind. (Past the bound, newcomers of one quota share one
// overflow entry, so some of them are refused: TestSprayingCannotResetLimits.)
func TestLocalStateBounded(t *testing.T) {
	e := New(Config{Default: Quota{CallsPerSecond: 1, ConcurrentCompacts: 1, SummarizerTokens: 10}}, Options{})
	in := e.UnaryServerInterceptor()
	for i := range maxLocalTenants + 10 {
		ctx := tenantCtx("t" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + time.Duration(i).String())
		if _, err := in(ctx, nil, compactInfo, ok); err != nil && i < maxLocalTenants-1 {
			t.Fatal(err)
		}
		if settle, err := e.ReserveTokens(ctx, auth.Tenant(ctx), 1); err == nil {
			settle(1)
		} else if i < maxLocalTenants-1 {
			t.Fatal(err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.rates.m) > maxLocalTenants || len(e.tokens.m) > maxLocalTenants || len(e.running) != 0 ||
		len(e.rates.overflow) > 1 || len(e.tokens.overflow) > 1 {
		t.Errorf("local state: %d rate limiters (%d overflow), %d token windows (%d overflow), %d running entries",
			len(e.rates.m), len(e.rates.overflow), len(e.tokens.m), len(e.tokens.overflow), len(e.running))
	}
}

// frozenClock is a clock that never moves, for the tests of the local fallback that spend
// a tenant's rate and then call many times: with the real one a slow run (the race
// detector on a loaded machine) refills the rate meanwhile.
func frozenClock() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) }

// TestSprayingCannotResetLimits: while Redis is down, naming more tenants than the local
// fallback remembers forgets nobody's limits: a tenant over its rate or its token budget
// stays over it; the newcomers share what is left.
func TestSprayingCannotResetLimits(t *testing.T) {
	e := New(Config{Default: Quota{CallsPerSecond: 0.01, Burst: 1, SummarizerTokens: 10}}, Options{Now: frozenClock})
	in := e.UnaryServerInterceptor()
	acme := tenantCtx("acme")
	if _, err := in(acme, nil, planInfo, ok); err != nil {
		t.Fatal(err)
	}
	settle, err := e.ReserveTokens(acme, "acme", 1)
	if err != nil {
		t.Fatal(err)
	}
	settle(10)
	for i := range 2 * maxLocalTenants {
		ctx := tenantCtx("spray-" + strconv.Itoa(i))
		_, _ = in(ctx, nil, planInfo, ok)
		if settle, err := e.ReserveTokens(ctx, auth.Tenant(ctx), 1); err == nil {
			settle(1)
		}
	}
	_, err = in(acme, nil, planInfo, ok)
	refusedBy(t, err, CallsPerSecond)
	_, err = e.ReserveTokens(acme, "acme", 1)
	refusedBy(t, err, SummarizerTokens)
}

// TestOverflowKeepsEachQuotasLimits (issue 33): with the local fallback full, newcomers of
// different quotas, alternating, do not reset each other's limits: each quota has its own
// overflow rate limiter and token window.
func TestOverflowKeepsEachQuotasLimits(t *testing.T) {
	e := New(Config{Default: Quota{CallsPerSecond: 0.01, Burst: 1, SummarizerTokens: 10, TokenWindow: time.Hour},
		Tenants: map[string]Quota{"big": {CallsPerSecond: 1000, Burst: 1000, SummarizerTokens: 1000, TokenWindow: 10 * time.Minute}}}, Options{Now: frozenClock})
	in := e.UnaryServerInterceptor()
	for i := range maxLocalTenants { // every entry spent: none at rest
		ctx := tenantCtx("resident-" + strconv.Itoa(i))
		if _, err := in(ctx, nil, planInfo, ok); err != nil {
			t.Fatal(err)
		}
		settle, err := e.ReserveTokens(ctx, auth.Tenant(ctx), 1)
		if err != nil {
			t.Fatal(err)
		}
		settle(1)
	}
	small, big := tenantCtx("newcomer"), tenantCtx("big")
	if _, err := in(small, nil, planInfo, ok); err != nil {
		t.Fatalf("a newcomer's first call: %v", err)
	}
	settle, err := e.ReserveTokens(small, "newcomer", 1)
	if err != nil {
		t.Fatal(err)
	}
	settle(10)
	for round := range 3 {
		if _, err := in(big, nil, planInfo, ok); err != nil {
			t.Fatalf("round %d: big within its rate: %v", round, err)
		}
		settle, err := e.ReserveTokens(big, "big", 1)
		if err != nil {
			t.Fatalf("round %d: big within its tokens: %v", round, err)
		}
		settle(1)
		_, err = in(small, nil, planInfo, ok)
		refusedBy(t, err, CallsPerSecond)
		_, err = e.ReserveTokens(small, "newcomer", 1)
		refusedBy(t, err, SummarizerTokens)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.rates.m) != maxLocalTenants || len(e.rates.overflow) != 2 || len(e.tokens.overflow) != 2 {
		t.Errorf("%d rate limiters, %d overflow limiters, %d overflow token windows: want %d, 2, 2",
			len(e.rates.m), len(e.rates.overflow), len(e.tokens.overflow), maxLocalTenants)
	}
}

// TestRedisAndLocalRatesAgree: Redis and the local fallback enforce the same rate, exactly,
// whole calls per second or not: 2.5 calls per second is one call every 400 ms in both.
func TestRedisAndLocalRatesAgree(t *testing.T) {
	for _, cps := range []float64{2.5, 0.3, 7, 1000.5, 1, 1.0 / 60} {
		l := Config{Default: Quota{CallsPerSecond: cps}}.For("t")
		g := gcraLimit(l)
		interval := g.Period / time.Duration(g.Rate)
		if want := time.Duration(float64(time.Second) / cps); interval < want-1 || interval > want+1 || g.Burst != l.Burst {
			t.Errorf("%g calls per second: Redis allows one every %v (burst %d), the local limiter one every %v (burst %d)", cps, interval, g.Burst, want, l.Burst)
		}
	}
	a, _, _ := replicas(t, Config{Default: Quota{CallsPerSecond: 2.5, Burst: 1}}, nil)
	in := a.UnaryServerInterceptor()
	if _, err := in(tenantCtx("acme"), nil, planInfo, ok); err != nil {
		t.Fatal(err)
	}
	_, err := in(tenantCtx("acme"), nil, planInfo, ok)
	refusedBy(t, err, CallsPerSecond)
	var retry time.Duration
	for _, d := range status.Convert(err).Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r.RetryDelay.AsDuration()
		}
	}
	if retry <= 300*time.Millisecond || retry > 400*time.Millisecond {
		t.Errorf("Redis says retry in %v, want just under the 400 ms of 2.5 calls per second", retry)
	}
}

// TestLeaseWithLostReplyIsTakenBack: a concurrent_compacts lease whose script Redis ran but
// whose reply came back after the timeout is removed again by the replica that asked for it
// (it knows its member), so the tenant's slot comes back in about a second rather than
// after the lease's 10 minutes.
func TestLeaseWithLostReplyIsTakenBack(t *testing.T) {
	node, proxy := redistest.Proxied(t)
	slow := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	defer slow.Close()
	direct := redis.NewClient(&redis.Options{Addr: node.Addr})
	defer direct.Close()
	ctx := context.Background()
	// A pooled connection, and the script loaded (EVALSHA runs it), before the delay.
	if err := acquireScript.Load(ctx, slow).Err(); err != nil {
		t.Fatal(err)
	}
	e := New(Config{Default: Quota{ConcurrentCompacts: 1}}, Options{Redis: slow})
	leases := key("acme", "compacts")
	seen := redistest.Ever(t, func() bool {
		n, _ := direct.ZCard(ctx, leases).Result()
		return n > 0
	})
	proxy.DelayReplies(300 * time.Millisecond)
	l, err := e.acquire(ctx, "acme", e.cfg.For("acme")) // decided locally once Redis is late
	if err != nil {
		t.Fatal(err)
	}
	l.release()
	var gone bool
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !gone; time.Sleep(20 * time.Millisecond) {
		n, err := direct.ZCard(ctx, leases).Result()
		gone = err == nil && n == 0
	}
	if !seen() {
		t.Fatal("the lease never reached Redis; the test proves nothing")
	}
	if !gone {
		t.Error("5 s after a lease's reply was lost, it still takes the tenant's slot")
	}
}

// holdLease takes a concurrent_compacts lease of tenant on e for a call whose deadline is in
// d (none when d is 0), or fails the test; it returns the lease's release.
func holdLease(t *testing.T, e *Enforcer, tenant string, d time.Duration) func() {
	t.Helper()
	ctx := context.Background()
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	l, err := e.acquire(ctx, tenant, e.cfg.For(tenant))
	if err != nil {
		t.Fatalf("a lease with a %v deadline: %v", d, err)
	}
	return l.release
}

// TestShortDeadlineKeepsOtherLeases (issue 33): a Compact with a short deadline, taking and
// giving back its lease, takes no other Compact's lease with it. A holds a slot with a
// 10-minute lease; B, on the other replica, takes the second slot with a 100 ms deadline and
// releases it; 1.5 s later (past B's lease, 1.1 s) one more Compact is admitted and the next
// refused while A still holds its slot.
func TestShortDeadlineKeepsOtherLeases(t *testing.T) {
	a, b, rdb := replicas(t, Config{Default: Quota{ConcurrentCompacts: 2}}, nil)
	k := key("acme", "compacts")
	releaseA := holdLease(t, a, "acme", 0)
	defer releaseA()
	holdLease(t, b, "acme", 100*time.Millisecond)()
	leaseSetOutlivesLeases(t, rdb, k)
	time.Sleep(1500 * time.Millisecond)
	if n := liveLeases(t, rdb, k); n != 1 {
		t.Errorf("1.5 s after a short lease came and went: %d live leases, want A's", n)
	}
	releaseC := holdLease(t, b, "acme", time.Minute)
	defer releaseC()
	_, err := a.acquire(context.Background(), "acme", a.cfg.For("acme"))
	refusedBy(t, err, ConcurrentCompacts)
}

// TestMixedDeadlinesAcrossReplicas: leases with long and short deadlines, taken and given back
// in turn on two replicas, never leave the lease set expiring before its longest live lease,
// and once the short ones have run out the long ones still count against the limit.
func TestMixedDeadlinesAcrossReplicas(t *testing.T) {
	a, b, rdb := replicas(t, Config{Default: Quota{ConcurrentCompacts: 4}}, nil)
	k := key("acme", "compacts")
	var held []func()
	defer func() {
		for _, release := range held {
			release()
		}
	}()
	for i, d := range []time.Duration{10 * time.Minute, 50 * time.Millisecond, 0, 200 * time.Millisecond, 20 * time.Millisecond} {
		e := []*Enforcer{a, b}[i%2]
		release := holdLease(t, e, "acme", d)
		if d == 0 || d >= time.Minute {
			held = append(held, release) // the long ones stay
		} else if i%3 == 1 {
			release() // given back at once
		} else {
			held = append(held, func() {}) // left to expire: its replica died
		}
		leaseSetOutlivesLeases(t, rdb, k)
	}
	time.Sleep(1500 * time.Millisecond) // every short lease (deadline + 1 s) has run out
	leaseSetOutlivesLeases(t, rdb, k)
	if n := liveLeases(t, rdb, k); n != 2 {
		t.Fatalf("after the short leases ran out: %d live leases, want the 2 long ones", n)
	}
	held = append(held, holdLease(t, a, "acme", time.Second), holdLease(t, b, "acme", 100*time.Millisecond))
	_, err := a.acquire(context.Background(), "acme", a.cfg.For("acme"))
	refusedBy(t, err, ConcurrentCompacts)
}

// leaseSetOutlivesLeases checks that the lease set k expires no sooner than its longest lease.
func leaseSetOutlivesLeases(t *testing.T, rdb *redis.Client, k string) {
	t.Helper()
	ctx := context.Background()
	last, err := rdb.ZRangeWithScores(ctx, k, -1, -1).Result()
	if err != nil || len(last) == 0 {
		return // no lease left: nothing to outlive
	}
	expiry, err := rdb.PExpireTime(ctx, k).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ms := expiry.Milliseconds(); ms < int64(last[0].Score) {
		t.Errorf("the lease set expires at %d ms (Redis time), %d ms before its longest lease", ms, int64(last[0].Score)-ms)
	}
}

// liveLeases counts the leases in the lease set k that have not expired by Redis's clock.
func liveLeases(t *testing.T, rdb *redis.Client, k string) int64 {
	t.Helper()
	ctx := context.Background()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	n, err := rdb.ZCount(ctx, k, "("+strconv.FormatInt(now.UnixMilli(), 10), "+inf").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestExtendedLeaseOutlivesItsDeadline: a lease taken with a 100 ms deadline and extended for
// 3 s (a preparation detached from its call) still counts 1.5 s later, the lease set lasting as
// long; given back, it frees the slot at once. Extending a lease already given back does not
// bring it back.
func TestExtendedLeaseOutlivesItsDeadline(t *testing.T) {
	a, b, rdb := replicas(t, Config{Default: Quota{ConcurrentCompacts: 1}}, nil)
	k := key("acme", "compacts")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	l, err := a.acquire(ctx, "acme", a.cfg.For("acme"))
	if err != nil {
		t.Fatal(err)
	}
	l.extend(3 * time.Second)
	leaseSetOutlivesLeases(t, rdb, k)
	time.Sleep(1500 * time.Millisecond)
	if _, err := b.acquire(context.Background(), "acme", b.cfg.For("acme")); err == nil {
		t.Fatal("1.5 s after its deadline, an extended lease no longer counts")
	} else {
		refusedBy(t, err, ConcurrentCompacts)
	}
	l.release()
	l.extend(3 * time.Second)
	if n := liveLeases(t, rdb, k); n != 0 {
		t.Errorf("a lease extended after it was given back: %d live leases, want 0", n)
	}
}

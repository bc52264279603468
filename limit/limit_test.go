package limit

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/compactord/compactord/auth"
	"github.com/compactord/compactord/internal/hold"
	"github.com/compactord/compactord/internal/redistest"
	"github.com/compactord/compactord/internal/tcpproxy"
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
func replicas(t *testing.T, cfg Config, m *metrics.Metrics) (a, b *Enforcer, rdb *redis.Client) {
	t.Helper()
	redistest.Need(t)
	node := redistest.Start(t, false)
	rdb = redis.NewClient(&redis.Options{Addr: node.Addr})
	t.Cleanup(func() { rdb.Close() })
	return New(cfg, Options{Redis: rdb, Metrics: m}), New(cfg, Options{Redis: rdb, Metrics: m}), rdb
}

func TestCallsPerSecondAcrossReplicas(t *testing.T) {
	cfg := Config{Default: Limits{CallsPerSecond: 1, Burst: 3}, Tenants: map[string]Limits{"big": {CallsPerSecond: 100, Burst: 100}}}
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
	a, b, _ := replicas(t, Config{Default: Limits{ConcurrentCompacts: 1}}, nil)
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
	a, b, _ := replicas(t, Config{Default: Limits{SummarizerTokens: 1000, TokenWindow: time.Hour}}, nil)
	ctx := tenantCtx("acme")
	if err := a.AdmitTokens(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	a.ChargeTokens(ctx, "acme", 600)
	if err := b.AdmitTokens(ctx, "acme"); err != nil {
		t.Fatalf("600 of 1000 spent: %v", err)
	}
	b.ChargeTokens(ctx, "acme", 400)
	refusedBy(t, a.AdmitTokens(ctx, "acme"), SummarizerTokens)
	if err := a.AdmitTokens(ctx, "globex"); err != nil {
		t.Errorf("another tenant: %v", err)
	}
}

// TestRedisDownFallsBackToLocal: with Redis gone, each replica enforces the limits alone
// and says so in compactord_limit_fallback_total.
func TestRedisDownFallsBackToLocal(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	dead := redis.NewClient(&redis.Options{Addr: closedAddr(t), DialTimeout: 20 * time.Millisecond, MaxRetries: -1})
	defer dead.Close()
	e := New(Config{Default: Limits{CallsPerSecond: 1, Burst: 2, ConcurrentCompacts: 1, SummarizerTokens: 10}},
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
	e.ChargeTokens(ctx, "acme", 10)
	refusedBy(t, e.AdmitTokens(ctx, "acme"), SummarizerTokens)
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

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
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
// finished Compact leaves no entry behind.
func TestLocalStateBounded(t *testing.T) {
	e := New(Config{Default: Limits{CallsPerSecond: 1, ConcurrentCompacts: 1, SummarizerTokens: 10}}, Options{})
	in := e.UnaryServerInterceptor()
	for i := range maxLocalTenants + 10 {
		ctx := tenantCtx("t" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + time.Duration(i).String())
		if _, err := in(ctx, nil, compactInfo, ok); err != nil {
			t.Fatal(err)
		}
		e.ChargeTokens(ctx, auth.Tenant(ctx), 1)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.rates) > maxLocalTenants || len(e.tokens) > maxLocalTenants || len(e.running) != 0 {
		t.Errorf("local state: %d rate limiters, %d token windows, %d running entries", len(e.rates), len(e.tokens), len(e.running))
	}
}

// TestLeaseWithLostReplyIsTakenBack: a concurrent_compacts lease whose script Redis ran but
// whose reply came back after the timeout is removed again by the replica that asked for it
// (it knows its member), so the tenant's slot comes back in about a second rather than
// after the lease's 10 minutes.
func TestLeaseWithLostReplyIsTakenBack(t *testing.T) {
	redistest.Need(t)
	node := redistest.Start(t, false)
	proxy, err := tcpproxy.New(node.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Stop()
	slow := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	defer slow.Close()
	direct := redis.NewClient(&redis.Options{Addr: node.Addr})
	defer direct.Close()
	ctx := context.Background()
	// A pooled connection, and the script loaded (EVALSHA runs it), before the delay.
	if err := acquireScript.Load(ctx, slow).Err(); err != nil {
		t.Fatal(err)
	}
	e := New(Config{Default: Limits{ConcurrentCompacts: 1}}, Options{Redis: slow})
	leases := key("acme", "compacts")
	var seen atomic.Bool
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n, _ := direct.ZCard(ctx, leases).Result(); n > 0 {
				seen.Store(true)
			}
		}
	}()
	proxy.DelayReplies(300 * time.Millisecond)
	release, err := e.acquire(ctx, "acme", e.cfg.For("acme")) // decided locally once Redis is late
	if err != nil {
		t.Fatal(err)
	}
	release()
	var gone bool
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !gone; time.Sleep(20 * time.Millisecond) {
		n, err := direct.ZCard(ctx, leases).Result()
		gone = err == nil && n == 0
	}
	if !seen.Load() {
		t.Fatal("the lease never reached Redis; the test proves nothing")
	}
	if !gone {
		t.Error("5 s after a lease's reply was lost, it still takes the tenant's slot")
	}
}

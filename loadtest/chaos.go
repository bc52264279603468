package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bojand/ghz/runner"
	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/tcpproxy"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Chaos (make chaos): faults injected into three replicas sharing a Redis while ghz drives
// Compact calls at them through one client that balances round-robin over the replicas and
// retries UNAVAILABLE with the service config's retry policy, as a client behind a headless
// Service would. Each scenario counts the calls sent and failed and the summaries lost (a
// Compact that returned no summary), checks its own goal, and the report goes to
// results/chaos.md, rewritten by every run.

// chaosEnv is what every chaos scenario runs against.
type chaosEnv struct {
	ctx      context.Context
	dir, bin string
	// sources are the sources keepSources kept, for expands.
	sources   []keptSource
	args, env []string
	redis     *proc
	redisPort int
	proxy     *tcpproxy.Proxy
	llm       *FakeLLM
	replicas  []*chaosReplica
	protoset  []byte
	hit, miss proto.Message // the cached request, and the base of the unique ones
	seq       atomic.Int64
	restarts  int
}

type chaosReplica struct {
	name    string
	port    int
	proc    *proc
	metrics string
}

func (r *chaosReplica) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// chaosEvent is one fault (or repair) at an offset into a scenario's load.
type chaosEvent struct {
	at   time.Duration
	what string
	do   func(*chaosEnv) error
	// note, instead of do, measures something and reports it in the result's notes.
	note func(*chaosEnv) []string
}

// chaosScenario is a load of d with events, and the goal it checks.
type chaosScenario struct {
	name, goal string
	d          time.Duration
	events     []chaosEvent
	// check returns what fell short of the goal; nil when it held.
	check func(e *chaosEnv, r *chaosResult) []string
}

// chaosResult is what a scenario measured.
type chaosResult struct {
	sent, ok     int
	failed       map[string]int
	p50, p99     time.Duration
	notes        []string
	rssStart     []int64 // KiB, replicas at the start
	rssEnd       []int64
	breakerOpen  int // "redis circuit breaker" transitions to open, all replicas
	breakerClose int
	problems     []string
}

func (r *chaosResult) failedTotal() int {
	n := 0
	for _, v := range r.failed {
		n += v
	}
	return n
}

// chaosLoad is the offered load: cache hits and unique (cache-missing) Compacts.
const (
	chaosHitRPS  = 30
	chaosMissRPS = 10
)

// chaosServiceConfig is the clients' service config: round-robin over the replicas and
// UNAVAILABLE retried with backoff. ghz takes only a load-balancing policy name, which it
// writes into {"loadBalancingPolicy":"%s"} unescaped; the rest of the config rides in that
// string, closed by a field the parser ignores.
const chaosServiceConfig = `round_robin","methodConfig":[{"name":[{"service":"compactor.v1.CompactorService"}],` +
	`"retryPolicy":{"maxAttempts":5,"initialBackoff":"0.1s","maxBackoff":"1s","backoffMultiplier":2,` +
	`"retryableStatusCodes":["UNAVAILABLE"]}}],"note":"`

func chaosScenarios() []chaosScenario {
	noFailures := func(_ *chaosEnv, r *chaosResult) []string {
		if n := r.failedTotal(); n > 0 {
			return []string{fmt.Sprintf("%d failed calls %v", n, r.failed)}
		}
		return nil
	}
	return []chaosScenario{
		{
			name: "cross-replica-wake-up",
			// First: later scenarios leave the LLM's breaker open, and fallback summaries are
			// not cached, so no replica would wait for another.
			goal: "under the same load, a replica waiting for another replica's summary returns within 10 ms (p99) of the writer's response: woken by Redis pub/sub, not a poll",
			d:    20 * time.Second,
			events: []chaosEvent{
				{2 * time.Second, "100 pairs of identical new requests on replica-1 and replica-2 at once", nil, (*chaosEnv).wakeUps},
			},
			check: func(e *chaosEnv, r *chaosResult) []string {
				p := noFailures(e, r)
				for _, n := range r.notes {
					if strings.HasPrefix(n, "NOT") {
						p = append(p, n)
					}
				}
				return p
			},
		},
		{
			name: "redis-killed-and-restarted",
			goal: "0 failed calls; the cache degrades to each replica's memory while Redis is down and hits again once it is back",
			d:    25 * time.Second,
			events: []chaosEvent{
				{3 * time.Second, "compact 20 new conversations, keeping their sources", nil, (*chaosEnv).keepSources},
				{5 * time.Second, "SIGKILL redis-server", (*chaosEnv).killRedis, nil},
				{6 * time.Second, "expand them with Redis down", nil, (*chaosEnv).expands},
				{12 * time.Second, "restart redis-server on the same port (empty: no persistence)", (*chaosEnv).startRedis, nil},
				{12 * time.Second, "measure how soon replicas share summaries again", nil, (*chaosEnv).sharedAgain},
				{14 * time.Second, "expand them with Redis back (empty)", nil, (*chaosEnv).expands},
			},
			check: func(e *chaosEnv, r *chaosResult) []string {
				p := append(noFailures(e, r), notes(r)...)
				if !slices.ContainsFunc(r.notes, func(n string) bool { return strings.HasPrefix(n, "shared again") }) {
					p = append(p, "replicas did not share summaries within 10 s of Redis returning")
				}
				return p
			},
		},
		{
			name: "redis-stalled",
			goal: "0 failed calls while a TCP proxy stops forwarding to Redis for 7 s (a partition, not a refusal); each cache command gives up within its 50 ms budget; the breaker opens and closes",
			d:    20 * time.Second,
			events: []chaosEvent{
				{3 * time.Second, "compact 20 new conversations, keeping their sources", nil, (*chaosEnv).keepSources},
				{5 * time.Second, "stall the proxy to Redis", func(e *chaosEnv) error { e.proxy.Stall(true); return nil }, nil},
				{6 * time.Second, "expand them while Redis is stalled", nil, (*chaosEnv).expands},
				{12 * time.Second, "resume the proxy", func(e *chaosEnv) error { e.proxy.Stall(false); return nil }, nil},
				{14 * time.Second, "expand them with Redis back", nil, (*chaosEnv).expands},
			},
			check: func(e *chaosEnv, r *chaosResult) []string {
				p := append(noFailures(e, r), notes(r)...)
				if r.breakerOpen == 0 || r.breakerClose == 0 {
					p = append(p, fmt.Sprintf("breaker opened %d and closed %d times; want both", r.breakerOpen, r.breakerClose))
				}
				// A call costs at most a few budgets (lookup, lock) while Redis is stalled.
				if r.p99 > time.Second {
					p = append(p, fmt.Sprintf("p99 %v: cache calls did not give up within their budget", r.p99))
				}
				return p
			},
		},
		{
			name: "replica-sigterm",
			goal: "0 failed calls at the retrying round-robin client while one replica drains on SIGTERM and exits; its in-flight calls finish",
			d:    20 * time.Second,
			events: []chaosEvent{
				{5 * time.Second, "SIGTERM replica-3", func(e *chaosEnv) error { return e.stopReplica(2) }, nil},
				{11 * time.Second, "check that replica-3 drained", nil, func(e *chaosEnv) []string { return e.drained(2) }},
				{12 * time.Second, "start replica-3 again on its port", func(e *chaosEnv) error { return e.startReplica(2) }, nil},
			},
			check: func(e *chaosEnv, r *chaosResult) []string {
				p := noFailures(e, r)
				for _, n := range r.notes {
					if strings.HasPrefix(n, "NOT") {
						p = append(p, n)
					}
				}
				return p
			},
		},
		{
			name: "llm-faults",
			goal: "0 failed calls with fallback: extractive while the fake LLM cycles through 429 + Retry-After, 500, timeouts, slow bodies, malformed JSON and empty summaries; without a fallback the calls fail UNAVAILABLE with RetryInfo, fast once the breaker is open, and within the caller's deadline",
			d:    20 * time.Second,
			events: []chaosEvent{
				{3 * time.Second, "LLM faults on (every mode in turn)", func(e *chaosEnv) error { e.llm.SetFaults(AllFaults...); return nil }, nil},
				{8 * time.Second, "LLM answers 500 only (a provider outage: trips the breaker)", func(e *chaosEnv) error { e.llm.SetFaults(FaultServer); return nil }, nil},
				{8 * time.Second, "probe the summarizer without a fallback", nil, (*chaosEnv).probe},
				{12 * time.Second, "LLM faults: every mode in turn again", func(e *chaosEnv) error { e.llm.SetFaults(AllFaults...); return nil }, nil},
				{16 * time.Second, "LLM faults off", func(e *chaosEnv) error { e.llm.SetFaults(); return nil }, nil},
			},
			check: noFailures,
		},
		{
			name: "everything-at-once",
			goal: "for one minute, all of the above overlapping: 0 failed calls, nothing lost, replica memory flat",
			d:    60 * time.Second,
			events: []chaosEvent{
				{5 * time.Second, "LLM faults on", func(e *chaosEnv) error { e.llm.SetFaults(AllFaults...); return nil }, nil},
				{10 * time.Second, "stall the proxy to Redis", func(e *chaosEnv) error { e.proxy.Stall(true); return nil }, nil},
				{17 * time.Second, "resume the proxy", func(e *chaosEnv) error { e.proxy.Stall(false); return nil }, nil},
				{22 * time.Second, "SIGTERM replica-2", func(e *chaosEnv) error { return e.stopReplica(1) }, nil},
				{25 * time.Second, "SIGKILL redis-server", (*chaosEnv).killRedis, nil},
				{30 * time.Second, "start replica-2 again", func(e *chaosEnv) error { return e.startReplica(1) }, nil},
				{35 * time.Second, "restart redis-server", (*chaosEnv).startRedis, nil},
				{45 * time.Second, "LLM faults off", func(e *chaosEnv) error { e.llm.SetFaults(); return nil }, nil},
			},
			check: func(e *chaosEnv, r *chaosResult) []string {
				p := noFailures(e, r)
				// Replicas that ran the whole minute (replica-2 restarted).
				for _, i := range []int{0, 2} {
					if r.rssStart[i] > 0 && float64(r.rssEnd[i]) > 1.5*float64(r.rssStart[i]) {
						p = append(p, fmt.Sprintf("%s RSS grew %d → %d KiB", e.replicas[i].name, r.rssStart[i], r.rssEnd[i]))
					}
				}
				return p
			},
		},
	}
}

// notes are the result's notes that say a goal was NOT met.
func notes(r *chaosResult) []string {
	var p []string
	for _, n := range r.notes {
		if strings.HasPrefix(n, "NOT") {
			p = append(p, n)
		}
	}
	return p
}

// runChaos runs every chaos scenario and writes results/chaos.md; it reports whether every
// goal held.
func runChaos(ctx context.Context, f flags) (bool, error) {
	repoRoot, err := findRepoRoot()
	if err != nil {
		return false, err
	}
	dir, err := os.MkdirTemp("", "compactord-chaos")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	e := &chaosEnv{ctx: ctx, dir: dir, bin: f.bin}
	defer e.close()
	if err := e.setup(repoRoot); err != nil {
		return false, err
	}
	var scenarios []chaosScenario
	for _, sc := range chaosScenarios() {
		if f.only == "" || strings.Contains(sc.name, f.only) {
			scenarios = append(scenarios, sc)
		}
	}
	results := make([]*chaosResult, len(scenarios))
	held := true
	for i, sc := range scenarios {
		logf("chaos %s (%v)", sc.name, sc.d)
		r, err := e.run(sc)
		if err != nil {
			return false, fmt.Errorf("%s: %w", sc.name, err)
		}
		r.problems = sc.check(e, r)
		held = held && len(r.problems) == 0
		results[i] = r
		logf("%s: %d sent, %d failed, %d lost, p99 %v: %s", sc.name, r.sent, r.failedTotal(), r.failedTotal(), r.p99, verdict(r.problems))
	}
	out := f.out
	if out == "" {
		out = filepath.Join("results", "chaos.md")
	}
	report := chaosReport(scenarios, results, gitDescribe(repoRoot))
	if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
		return false, err
	}
	logf("wrote %s", out)
	return held, nil
}

func verdict(problems []string) string {
	if len(problems) == 0 {
		return "held"
	}
	return "NOT held: " + strings.Join(problems, "; ")
}

// setup builds compactord, starts Redis behind the stall proxy, the fake LLM and three
// replicas, and builds the requests.
func (e *chaosEnv) setup(repoRoot string) error {
	var err error
	if e.bin, err = serverBinary(e.ctx, e.bin, repoRoot, e.dir); err != nil {
		return err
	}
	if e.redisPort, err = freePort(); err != nil {
		return err
	}
	if err := e.startRedis(); err != nil {
		return err
	}
	if e.proxy, err = tcpproxy.New("127.0.0.1:" + strconv.Itoa(e.redisPort)); err != nil {
		return err
	}
	e.llm = &FakeLLM{Latency: 20 * time.Millisecond}
	if err := e.llm.Start(); err != nil {
		return err
	}
	cfg := filepath.Join(e.dir, "compactord.yaml")
	if err := os.WriteFile(cfg, []byte(chaosConfig(e.llm.BaseURL())), 0o600); err != nil {
		return err
	}
	e.args = []string{"--metrics-listen", "127.0.0.1:0", "--drain-timeout", "10s", "--config", cfg,
		"--redis-url", "redis://" + e.proxy.Addr() + "/0"}
	e.env = []string{"LOADTEST_FAKE_LLM_KEY=fake-key", "OTEL_TRACES_EXPORTER=none", "GOGC=400", "GOMEMLIMIT=400MiB"}
	addrs := make([]resolver.Address, 3)
	for i := range 3 {
		port, err := freePort()
		if err != nil {
			return err
		}
		e.replicas = append(e.replicas, &chaosReplica{name: fmt.Sprintf("replica-%d", i+1), port: port})
		if err := e.startReplica(i); err != nil {
			return err
		}
		addrs[i] = resolver.Address{Addr: e.replicas[i].addr()}
	}
	rb := manual.NewBuilderWithScheme("chaos")
	rb.InitialState(resolver.State{Addresses: addrs})
	resolver.Register(rb)
	if e.protoset, err = descriptorSet(); err != nil {
		return err
	}
	conn, err := grpc.NewClient(e.replicas[0].addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	msgs, err := liftCorpus(e.ctx, conn, filepath.Join(repoRoot, "internal", "corpus", "testdata"), "fixture-swe-units.openai.json")
	if err != nil {
		return err
	}
	policy := &compactorv1.Policy{ContextWindow: 2500, SummaryMaxTokens: 500}
	e.hit = &compactorv1.CompactRequest{Messages: msgs, Policy: policy}
	e.miss = proto.Clone(e.hit)
	return nil
}

// chaosConfig: the default summarizer calls the fake LLM and falls back to extractive; "llm"
// is the same without a fallback, for the probes.
func chaosConfig(baseURL string) string {
	sum := func(name, fallback string) string {
		s := fmt.Sprintf("  - name: %s\n    kind: openai\n    base_url: %s\n    model: fake\n    api_key_env: LOADTEST_FAKE_LLM_KEY\n    timeout: 1s\n    max_attempts: 2\n", name, baseURL)
		if fallback != "" {
			s += "    fallback: " + fallback + "\n"
		}
		return s
	}
	return "default_summarizer: llm-fb\nsummarizers:\n" + sum("llm-fb", "extractive") + sum("llm", "")
}

func (e *chaosEnv) startRedis() error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server not found: %w", err)
	}
	p, _, err := startProc(e.ctx, e.dir, "redis-"+strconv.Itoa(e.restarts), "", bin, []string{
		"--port", strconv.Itoa(e.redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
	}, nil)
	e.restarts++
	if err != nil {
		return err
	}
	e.redis = p
	return waitPing(e.ctx, p, "127.0.0.1:"+strconv.Itoa(e.redisPort))
}

func (e *chaosEnv) killRedis() error {
	_ = e.redis.cmd.Process.Kill()
	<-e.redis.done
	return nil
}

func (e *chaosEnv) startReplica(i int) error {
	r := e.replicas[i]
	e.restarts++
	args := append([]string{"--listen", r.addr()}, e.args...)
	p, _, err := startProc(e.ctx, e.dir, fmt.Sprintf("%s-%d", r.name, e.restarts), "serving", e.bin, args, e.env)
	if err != nil {
		return err
	}
	r.proc, r.metrics = p, p.loggedAddr("metrics")
	return nil
}

// stopReplica sends SIGTERM and returns at once; the replica drains, then exits.
func (e *chaosEnv) stopReplica(i int) error {
	p := e.replicas[i].proc
	go p.stop(30 * time.Second)
	return nil
}

func (e *chaosEnv) close() {
	for _, r := range e.replicas {
		if r.proc != nil {
			r.proc.stop(5 * time.Second)
		}
	}
	if e.proxy != nil {
		e.proxy.Stop()
	}
	if e.llm != nil {
		e.llm.Close()
	}
	if e.redis != nil {
		e.redis.stop(2 * time.Second)
	}
}

// run drives sc's load, fires its events, and gathers the result.
func (e *chaosEnv) run(sc chaosScenario) (*chaosResult, error) {
	r := &chaosResult{failed: map[string]int{}}
	for _, rep := range e.replicas {
		k, _ := rssKiB(rep.proc.cmd.Process.Pid)
		r.rssStart = append(r.rssStart, k)
	}
	logsBefore := e.breakerTransitions()

	var wg sync.WaitGroup
	var mu sync.Mutex
	var loadErr error
	var lat []time.Duration
	for _, l := range []struct {
		rps    uint
		unique bool
	}{{chaosHitRPS, false}, {chaosMissRPS, true}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := e.load(sc.d, l.rps, l.unique)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				loadErr = err
				return
			}
			for _, d := range rep.Details {
				r.sent++
				if d.Error == "" {
					r.ok++
					lat = append(lat, d.Latency)
					continue
				}
				r.failed[d.Status]++
			}
		}()
	}
	start := time.Now()
	for _, ev := range sc.events {
		if d := time.Until(start.Add(ev.at)); d > 0 {
			time.Sleep(d)
		}
		logf("  %v: %s", ev.at, ev.what)
		if ev.note != nil {
			r.notes = append(r.notes, ev.note(e)...)
			continue
		}
		if err := ev.do(e); err != nil {
			return nil, fmt.Errorf("%s: %w", ev.what, err)
		}
	}
	wg.Wait()
	if loadErr != nil {
		return nil, loadErr
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p50, r.p99 = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
	}
	for _, rep := range e.replicas {
		k, _ := rssKiB(rep.proc.cmd.Process.Pid)
		r.rssEnd = append(r.rssEnd, k)
	}
	after := e.breakerTransitions()
	r.breakerOpen, r.breakerClose = after[0]-logsBefore[0], after[1]-logsBefore[1]
	return r, nil
}

// load runs ghz for d at rps with the retrying round-robin client: the cached request, or
// unique ones.
func (e *chaosEnv) load(d time.Duration, rps uint, unique bool) (*runner.Report, error) {
	codec := newLoadCodec(true)
	if unique {
		codec.gen = func() ([]byte, error) {
			req, err := uniqueRequest(e.miss, e.seq.Add(1))
			if err != nil {
				return nil, err
			}
			return proto.Marshal(req)
		}
	}
	body, err := proto.Marshal(e.hit)
	if err != nil {
		return nil, err
	}
	rep, err := runner.Run("compactor.v1.CompactorService.Compact", "chaos:///replicas",
		runner.WithProtosetBinary(e.protoset), runner.WithInsecure(true),
		runner.WithConcurrency(16), runner.WithRPS(rps), runner.WithRunDuration(d),
		runner.WithDurationStopAction("wait"), runner.WithTimeout(callTimeout),
		runner.WithClientLoadBalancing(chaosServiceConfig),
		runner.WithDefaultCallOptions(codec.callOptions()), runner.WithBinaryData(body),
		runner.WithDisableTemplateData(true), runner.WithDisableTemplateFuncs(true))
	rearmSignals()
	if err != nil {
		return nil, fmt.Errorf("ghz: %s", oneLine(err.Error(), 300))
	}
	return rep, nil
}

// probe calls the summarizer that has no fallback while the LLM misbehaves: each call must
// fail UNAVAILABLE with RetryInfo (fast once the breaker is open), and a call with a short
// deadline must return by it.
func (e *chaosEnv) probe() []string {
	conn, err := grpc.NewClient(e.replicas[0].addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return []string{"probe: " + err.Error()}
	}
	defer conn.Close()
	client := compactorv1.NewCompactorServiceClient(conn)
	var notes []string
	for i := range 8 {
		req, err := uniqueRequest(e.miss, e.seq.Add(1))
		if err != nil {
			return []string{"probe: " + err.Error()}
		}
		r := req.(*compactorv1.CompactRequest)
		r.Summarizer = "llm"
		deadline := 10 * time.Second
		if i == 0 {
			deadline = 500 * time.Millisecond // the caller's deadline bounds the retries
		}
		ctx, cancel := context.WithTimeout(e.ctx, deadline)
		t0 := time.Now()
		_, err = client.Compact(ctx, r)
		cancel()
		took := time.Since(t0)
		st := status.Convert(err)
		retry := false
		for _, d := range st.Details() {
			if _, ok := d.(*errdetails.RetryInfo); ok {
				retry = true
			}
		}
		note := fmt.Sprintf("probe %d without fallback (deadline %v): %s in %v", i+1, deadline, st.Code(), took.Round(time.Millisecond))
		switch {
		case err == nil:
			note += " (served: the LLM answered between faults)"
		case st.Code() == codes.Unavailable && retry:
			note += ", RetryInfo"
		case st.Code() == codes.DeadlineExceeded && i == 0 && took < deadline+300*time.Millisecond:
			note += ", within the deadline"
		default:
			note += " — UNEXPECTED: " + oneLine(st.Message(), 120)
		}
		if strings.Contains(st.Message(), "circuit breaker open") {
			note += ", breaker open"
		}
		notes = append(notes, note)
	}
	return notes
}

// wakeUps sends 100 pairs of the same new request to two replicas at once: one computes the
// summary (MISS), the other waits for it (HIT). The waiter's lag behind the writer is how
// long a stored summary takes to wake it.
func (e *chaosEnv) wakeUps() []string {
	clients := make([]compactorv1.CompactorServiceClient, 2)
	for i := range clients {
		conn, err := grpc.NewClient(e.replicas[i].addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return []string{"NOT measured: " + err.Error()}
		}
		defer conn.Close()
		clients[i] = compactorv1.NewCompactorServiceClient(conn)
	}
	var lags []time.Duration
	skipped := 0
	for range 100 {
		req, err := uniqueRequest(e.miss, e.seq.Add(1))
		if err != nil {
			return []string{"NOT measured: " + err.Error()}
		}
		type answer struct {
			status compactorv1.CacheStatus
			at     time.Time
			err    error
		}
		answers := make(chan answer, 2)
		for _, c := range clients {
			go func() {
				ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
				defer cancel()
				resp, err := c.Compact(ctx, req.(*compactorv1.CompactRequest))
				answers <- answer{resp.GetCacheStatus(), time.Now(), err}
			}()
		}
		a, b := <-answers, <-answers
		if a.err != nil || b.err != nil {
			return []string{fmt.Sprintf("NOT measured: %v %v", a.err, b.err)}
		}
		if a.status == compactorv1.CacheStatus_CACHE_STATUS_HIT {
			a, b = b, a
		}
		// Both must have been in flight together: one wrote, the other waited.
		if a.status != compactorv1.CacheStatus_CACHE_STATUS_MISS || b.status != compactorv1.CacheStatus_CACHE_STATUS_HIT {
			skipped++
			continue
		}
		lags = append(lags, max(0, b.at.Sub(a.at)))
	}
	if len(lags) < 50 {
		return []string{fmt.Sprintf("NOT measured: only %d of 100 pairs had one writer and one waiter", len(lags))}
	}
	slices.Sort(lags)
	p50, p99 := lags[len(lags)/2], lags[min(len(lags)-1, len(lags)*99/100)]
	note := fmt.Sprintf("waiter behind writer over %d pairs (%d others not a writer/waiter pair): p50 %v, p99 %v, max %v",
		len(lags), skipped, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), lags[len(lags)-1].Round(10*time.Microsecond))
	if p99 > 10*time.Millisecond {
		note = "NOT within 10 ms: " + note
	}
	return []string{note}
}

// drained reports whether replica i, sent SIGTERM, finished every in-flight call before it
// exited: its log says "stopped", not "drain timeout".
func (e *chaosEnv) drained(i int) []string {
	p := e.replicas[i].proc
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		return []string{"NOT drained: " + e.replicas[i].name + " still running 10 s after SIGTERM"}
	}
	b, err := os.ReadFile(p.log)
	switch {
	case err != nil:
		return []string{"NOT checked: " + err.Error()}
	case strings.Contains(string(b), `"msg":"stopped"`):
		return []string{e.replicas[i].name + " drained: every call in flight at SIGTERM finished before it exited (its log says \"stopped\")"}
	}
	return []string{"NOT drained: " + e.replicas[i].name + " exited without finishing its calls (drain timeout)"}
}

// sharedAgain measures how long after now a summary computed on one replica is a cache hit
// on another: Redis shares summaries again.
func (e *chaosEnv) sharedAgain() []string {
	t0 := time.Now()
	if err := e.crossReplicaHit(); err != nil {
		return []string{"NOT shared again: " + err.Error()}
	}
	return []string{fmt.Sprintf("shared again %v after Redis returned: a summary computed on replica-1 was a cache hit on replica-2", time.Since(t0).Round(10*time.Millisecond))}
}

// crossReplicaHit computes a new summary on one replica and asks another for it, until that
// is a hit (10 s at most).
func (e *chaosEnv) crossReplicaHit() error {
	req, err := uniqueRequest(e.miss, e.seq.Add(1))
	if err != nil {
		return err
	}
	var last compactorv1.CacheStatus
	for attempt := 0; attempt < 20; attempt++ {
		for i, rep := range e.replicas[:2] {
			conn, err := grpc.NewClient(rep.addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
			resp, err := compactorv1.NewCompactorServiceClient(conn).Compact(ctx, req.(*compactorv1.CompactRequest))
			cancel()
			conn.Close()
			if err != nil {
				return err
			}
			last = resp.GetCacheStatus()
			if i == 1 && last == compactorv1.CacheStatus_CACHE_STATUS_HIT {
				return nil
			}
		}
		time.Sleep(500 * time.Millisecond)
		if req, err = uniqueRequest(e.miss, e.seq.Add(1)); err != nil {
			return err
		}
	}
	return fmt.Errorf("no cross-replica hit within 10 s (last status %s)", last)
}

// breakerTransitions counts the replicas' logged breaker transitions to open and to closed.
func (e *chaosEnv) breakerTransitions() [2]int {
	var n [2]int
	files, _ := filepath.Glob(filepath.Join(e.dir, "replica-*.log"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "redis circuit breaker") {
				continue
			}
			switch {
			case strings.Contains(line, `"to":"open"`):
				n[0]++
			case strings.Contains(line, `"to":"closed"`):
				n[1]++
			}
		}
	}
	return n
}

func chaosReport(scenarios []chaosScenario, results []*chaosResult, rev string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Chaos\n\nCommand: `make chaos` (`cd loadtest && go run . -chaos`), %s, %s, %s/%s, %d CPUs shared by ghz, three replicas, Redis and the fake LLM.\n\n",
		rev, time.Now().UTC().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	fmt.Fprintf(&b, "Load: ghz sends Compact calls of the project's 25-message fixture, %d/s of one cached request and %d/s of unique ones (each a new summary), "+
		"through one client that balances round-robin over the three replicas and retries UNAVAILABLE (the service config's retry policy). "+
		"The default summarizer calls the fake LLM with `fallback: extractive`. \"Lost\" counts Compacts that returned no summary.\n\n",
		chaosHitRPS, chaosMissRPS)
	fmt.Fprintf(&b, "| scenario | duration | sent | failed | summaries lost | p50 | p99 | goal |\n|---|---|---|---|---|---|---|---|\n")
	for i, sc := range scenarios {
		r := results[i]
		fmt.Fprintf(&b, "| %s | %v | %d | %d | %d | %v | %v | %s |\n", sc.name, sc.d, r.sent, r.failedTotal(), r.failedTotal(),
			r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond), verdict(r.problems))
	}
	for i, sc := range scenarios {
		r := results[i]
		fmt.Fprintf(&b, "\n## %s\n\nGoal: %s.\n\n", sc.name, sc.goal)
		for _, ev := range sc.events {
			fmt.Fprintf(&b, "- at %v: %s\n", ev.at, ev.what)
		}
		if len(r.failed) > 0 {
			fmt.Fprintf(&b, "\nFailed calls by code: %v\n", r.failed)
		}
		fmt.Fprintf(&b, "\nRedis breaker transitions logged by the replicas: %d to open, %d to closed. Replica RSS (KiB) at start → end: ", r.breakerOpen, r.breakerClose)
		for j := range r.rssStart {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%d → %d", r.rssStart[j], r.rssEnd[j])
		}
		b.WriteString(".\n")
		for _, n := range r.notes {
			fmt.Fprintf(&b, "\n- %s", n)
		}
		if len(r.notes) > 0 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

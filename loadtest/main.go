// Command loadtest drives compactord with ghz and writes a Markdown report.
//
// It builds and starts the server (by default one replica with a throwaway redis-server as
// its summary cache; -replicas N starts N sharing it, -redis=false one with its in-memory
// cache only), starts a fake OpenAI-compatible LLM on loopback with a
// fixed latency, builds every scenario's request from the real corpus, checks each scenario
// with a preflight call, measures the health-check baseline and then every scenario at the
// same concurrency, in rounds that give each scenario one slice right after a baseline slice,
// and writes RPS, latency percentiles, errors and ratios to the baseline to
// results/loadtest-<N>-replicas.md, one file per topology rewritten by every run (git keeps
// the earlier ones).
// With -soak the rounds go on for the given time, after a fill of the bounded stores, and the
// servers' memory is sampled after every slice. With -floor (the default), every scenario
// with a target also runs in each round against loadtest/floorserver, compactord's gRPC stack
// answering with compactord's response and doing no work: the floor of its ratio. Everything
// listens on loopback; every child process is stopped on exit.
//
//	cd loadtest && go run . -soak 5m
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// flags are the driver's options.
type flags struct {
	scenarios   string
	out         string
	replicas    int
	redis       bool
	bin         string
	duration    time.Duration
	warmup      time.Duration
	concurrency uint
	slices      int
	only        string
	soak        time.Duration
	llmLatency  time.Duration
	keep        bool
	floor       bool
	serverEnv   envList
	serverArgs  argList
	soakFill    time.Duration
	// -shed: the load-shedding measurement instead of the scenarios (shed.go).
	shed         bool
	shedMax      string
	shedDuration time.Duration
	// -chaos: the chaos scenarios instead (chaos.go).
	chaos bool
	// shedConversation names the conversation whose Plan -shed sends.
	shedConversation string
	// -prepared: Compact at the trigger with and without a prepared summary (prepared.go),
	// over preparedCalls calls each.
	prepared      bool
	preparedCalls int
}

func main() {
	var f flags
	f.register(flag.CommandLine)
	flag.Parse()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-signals:
			cancel()
		case <-ctx.Done():
		}
	}()
	rearmSignals()
	measure := run
	switch {
	case f.shed:
		measure = runShed
	case f.chaos:
		measure = runChaos
	case f.prepared:
		measure = runPrepared
	}
	ok, err := measure(ctx, f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
	if !ok {
		fmt.Fprintln(os.Stderr, "loadtest: errors or failed scenarios; see the report")
		os.Exit(1)
	}
}

// signals receives SIGINT and SIGTERM: the driver stops and cleans up.
var signals = make(chan os.Signal, 1)

// rearmSignals makes signals the only receiver of SIGINT and SIGTERM again. Every ghz run
// registers its own SIGINT channel and never unregisters it; a later Ctrl-C would make those
// stale handlers stop finished runs and panic (send on a closed channel), so the driver drops
// them after each run.
func rearmSignals() {
	signal.Reset(syscall.SIGTERM, os.Interrupt)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, a...)...)
}

// run does the whole load test and reports whether it had zero errors: it reads the suite,
// builds the binaries, starts the servers, measures every scenario in rounds, and writes the
// report. Everything it started is stopped on the way out, newest first.
func run(ctx context.Context, f flags) (bool, error) {
	started := time.Now()
	suite, err := loadSuite(f)
	if err != nil {
		return false, err
	}
	repoRoot, err := findRepoRoot()
	if err != nil {
		return false, err
	}
	corpus, err := corpusDir(repoRoot)
	if err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp("", "compactord-loadtest-")
	if err != nil {
		return false, err
	}
	if f.keep {
		logf("temp dir (kept): %s", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	bin, err := serverBinary(ctx, f.bin, repoRoot, tmp)
	if err != nil {
		return false, err
	}
	var floorBin, floorModules string
	if f.floor {
		logf("building floorserver")
		if floorBin, floorModules, err = buildFloor(ctx, tmp, bin); err != nil {
			return false, err
		}
	}

	// Processes are stopped after everything else is closed.
	var procs []*proc
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop(5 * time.Second)
		}
	}()
	var closers cleanups
	defer closers.run()
	e, topology, err := startServers(ctx, f, tmp, bin, &procs, &closers)
	if err != nil {
		return false, err
	}
	mem := newMemory(append(replicaProcs(e), redisProcs(procs)...))
	if err := mem.start(); err != nil {
		return false, err
	}
	rep := &Report{
		Date:     started,
		Command:  "cd loadtest && go run . " + strings.Join(os.Args[1:], " "),
		Commit:   gitDescribe(repoRoot),
		Env:      fmt.Sprintf("%s %s/%s, %d CPUs (load generator and servers share them), ghz runner v0.121.0", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU()),
		Topology: topology,
	}
	m := &measurement{ctx: ctx, f: f, e: e, corpus: corpus, tmp: tmp, floorBin: floorBin, procs: &procs, closers: &closers, sample: mem.sample}
	if err := m.suite(suite, rep); err != nil {
		return false, err
	}
	if f.floor {
		rep.FloorModules = floorModules
	}
	rep.Memory = mem.finish()
	rep.Notes = append(rep.Notes,
		"RPS counts every call of the measured run over its wall time; the warm-up before each scenario is not counted.",
		"Percentiles are nearest-rank over the calls that returned OK, measured by the ghz client (queueing in the client included).",
		"Requests are built from the real corpus (internal/corpus/testdata/real, or COMPACTORD_CORPUS), lifted by the server's own Lift RPC and cut at a turn boundary; ghz sends them as binary protobuf.",
		"Cache-miss requests differ only in a marker prepended to the first user message, so every call has a new prefix hash and makes one summarizer call.",
		fmt.Sprintf("Total driver wall time: %s.", time.Since(started).Round(time.Second)),
	)
	out := cmp.Or(f.out, defaultReport(f.replicas))
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return false, err
	}
	if err := os.WriteFile(out, []byte(rep.Markdown()), 0o644); err != nil {
		return false, err
	}
	logf("wrote %s (%s)", out, time.Since(started).Round(time.Second))
	return rep.OK(), nil
}

// cleanups are functions run newest first: connections to close, servers to stop.
type cleanups []func()

func (c *cleanups) add(f func()) { *c = append(*c, f) }

func (c cleanups) run() {
	for i := len(c) - 1; i >= 0; i-- {
		c[i]()
	}
}

// loadSuite checks the topology flags and reads the scenarios, with the flags' overrides.
func loadSuite(f flags) (*Suite, error) {
	if f.replicas < 1 || f.replicas > 8 {
		return nil, errors.New("-replicas must be 1..8")
	}
	if !f.redis && f.replicas > 1 {
		return nil, errors.New("-redis=false needs -replicas 1: replicas share summaries only through Redis")
	}
	sf, err := os.Open(f.scenarios)
	if err != nil {
		return nil, err
	}
	suite, err := ParseSuite(sf)
	sf.Close()
	if err != nil {
		return nil, err
	}
	if err := applyOverrides(suite, f); err != nil {
		return nil, err
	}
	return suite, nil
}

// startServers starts the fake LLM, the throwaway Redis (unless -redis=false) and the
// replicas, connects to each and registers the round-robin resolver ghz dials. It returns
// the environment and the report's description of the topology; every process goes on
// procs, every connection and the LLM on closers.
func startServers(ctx context.Context, f flags, tmp, bin string, procs *[]*proc, closers *cleanups) (*env, string, error) {
	llm := &FakeLLM{Latency: f.llmLatency}
	if err := llm.Start(); err != nil {
		return nil, "", err
	}
	closers.add(func() { llm.Close() })
	cfgPath := filepath.Join(tmp, "compactord.yaml")
	if err := os.WriteFile(cfgPath, []byte(serverConfig(llm.BaseURL())), 0o600); err != nil {
		return nil, "", err
	}
	args := []string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--drain-timeout", "2s", "--config", cfgPath}
	if f.redis {
		rp, raddr, err := startRedis(ctx, tmp)
		if err != nil {
			return nil, "", err
		}
		*procs = append(*procs, rp)
		args = append(args, "--redis-url", "redis://"+raddr+"/0")
	}
	args = append(args, f.serverArgs...)
	e := &env{llm: llm}
	if err := e.startReplicas(ctx, f, tmp, bin, args, procs, closers); err != nil {
		return nil, "", err
	}
	addrs := make([]resolver.Address, len(e.replicas))
	for i, r := range e.replicas {
		addrs[i] = resolver.Address{Addr: r.addr}
	}
	rb := manual.NewBuilderWithScheme("loadtest")
	rb.InitialState(resolver.State{Addresses: addrs})
	resolver.Register(rb)
	e.host = "loadtest:///compactord"
	var err error
	if e.protoset, err = descriptorSet(); err != nil {
		return nil, "", err
	}
	return e, describeTopology(f), nil
}

// startReplicas starts -replicas compactord processes with args and connects to each.
func (e *env) startReplicas(ctx context.Context, f flags, tmp, bin string, args []string, procs *[]*proc, closers *cleanups) error {
	for i := range f.replicas {
		name := fmt.Sprintf("replica-%d", i+1)
		p, addr, err := startProc(ctx, tmp, name, "serving", bin, args,
			append([]string{"LOADTEST_FAKE_LLM_KEY=fake-key", "OTEL_TRACES_EXPORTER=none"}, f.serverEnv...))
		if err != nil {
			return err
		}
		*procs = append(*procs, p)
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			return err
		}
		closers.add(func() { conn.Close() })
		maddr := p.loggedAddr("metrics")
		if maddr == "" {
			return fmt.Errorf("%s logged no metrics address", name)
		}
		e.replicas = append(e.replicas, &replica{name: name, addr: addr, metrics: maddr, proc: p, conn: conn})
		logf("%s serving on %s (pid %d)", name, addr, p.cmd.Process.Pid)
	}
	return nil
}

// describeTopology is the report's description of the servers the flags start.
func describeTopology(f flags) string {
	topology := fmt.Sprintf("%d replica(s), in-memory summary cache", f.replicas)
	if f.redis {
		topology = fmt.Sprintf("1 replica with a throwaway %s on loopback (no persistence) as its summary cache, behind its in-memory tier", redisVersion())
		if f.replicas > 1 {
			topology = fmt.Sprintf("%d replicas sharing a throwaway %s on loopback (no persistence)", f.replicas, redisVersion())
		}
	}
	if f.replicas > 1 {
		topology += "; ghz balances calls round-robin over the replicas through one client connection (a gRPC round_robin policy over a static resolver, as a client behind a headless Service would)"
	}
	topology += fmt.Sprintf("; fake OpenAI-compatible LLM with %s fixed latency; servers on their default flags otherwise (JSON log line per call at info level, drained to a file)", f.llmLatency)
	if len(f.serverEnv) > 0 {
		topology += "; replica environment adds " + strings.Join(f.serverEnv, " ")
	}
	if len(f.serverArgs) > 0 {
		topology += "; replica flags add " + strings.Join(f.serverArgs, " ")
	}
	return topology
}

// memory samples the resident memory of the servers: at start, between slices (its peak)
// and at the end.
type memory struct {
	procs []*proc
	rows  []MemRow
}

func newMemory(procs []*proc) *memory { return &memory{procs: procs} }

// start takes the first sample, after start-up and before any load.
func (m *memory) start() error {
	for _, p := range m.procs {
		k, err := rssKiB(p.cmd.Process.Pid)
		if err != nil {
			return fmt.Errorf("reading RSS of %s: %w", p.name, err)
		}
		m.rows = append(m.rows, MemRow{Process: p.name, StartKiB: k, PeakSample: k})
	}
	return nil
}

// sample returns every process's RSS now (0 when unreadable), keeping the peaks.
func (m *memory) sample() []int64 {
	out := make([]int64, len(m.procs))
	for i, p := range m.procs {
		if k, err := rssKiB(p.cmd.Process.Pid); err == nil {
			out[i] = k
			m.rows[i].PeakSample = max(m.rows[i].PeakSample, k)
		}
	}
	return out
}

// finish takes the last sample and returns the report's rows.
func (m *memory) finish() []MemRow {
	end := m.sample()
	for i := range m.rows {
		m.rows[i].EndKiB = end[i]
	}
	return m.rows
}

// measurement measures a suite against the started servers.
type measurement struct {
	ctx      context.Context
	f        flags
	e        *env
	corpus   string
	tmp      string
	floorBin string
	procs    *[]*proc
	closers  *cleanups
	sample   func() []int64
}

// prepare builds a scenario's payload and makes its preflight calls.
func (m *measurement) prepare(sc *Scenario) (*Payload, Result, error) {
	res := Result{Name: sc.Name, Call: sc.Call, Concurrency: sc.Concurrency, Target: sc.Target}
	p, err := buildPayload(m.ctx, m.e.replicas[0].conn, m.corpus, sc)
	if err != nil {
		return nil, res, err
	}
	res.Payload = describePayload(sc, p)
	if m.f.keep {
		if _, err := writePayload(m.tmp, sc.Name, p.Request); err != nil {
			return nil, res, err
		}
	}
	res.Notes, err = m.e.preflight(m.ctx, sc, p)
	return p, res, err
}

// suite measures the baseline alone first (it warms the servers up and stands for the whole
// run even when no other scenario can run), then every scenario, in rounds where each
// scenario's slices alternate with baseline slices (and, with -floor, its floor's), through
// the soak when asked; all baseline slices add up to the baseline row. It fills rep's
// results, floor rows and soak.
func (m *measurement) suite(suite *Suite, rep *Report) error {
	base := &suite.Scenarios[0]
	bp, baseAll, err := m.prepare(base)
	if err != nil {
		return fmt.Errorf("baseline %s: %w", base.Name, err)
	}
	opening := newTrial(base, bp, nil)
	if err := m.e.rounds(m.ctx, []*trial{opening}, nil, nil, nil, m.sample); err != nil {
		return err
	}
	opening.finish()
	baseAll.add(opening.r)

	results, trials, placed, err := m.scenarios(suite, base)
	if err != nil {
		return err
	}
	order, floors, err := m.withFloors(trials, base)
	if err != nil {
		return err
	}
	if m.f.soak > 0 && len(trials) > 0 {
		rep.Soak = &Soak{Duration: m.f.soak, MaxGrowth: 1.2}
		if err := m.e.fill(m.ctx, trials, m.f.soakFill, rep.Soak); err != nil {
			return err
		}
		logf("soak: every scenario after a baseline slice, round after round, for %s", m.f.soak)
	}
	if err := m.e.rounds(m.ctx, order, base, bp, rep.Soak, m.sample); err != nil {
		return err
	}

	for i, t := range trials {
		t.finish()
		res := &results[placed[i]]
		r := t.r
		r.Payload, r.Notes, r.Baseline = res.Payload, append(res.Notes, r.Notes...), t.b
		baseAll.add(t.b)
		*res = *r
		logResult(t.label(), r)
	}
	for _, t := range floors {
		t.finish()
		r := t.r
		r.Baseline = t.b
		rep.Floor = append(rep.Floor, *r)
		logResult(t.label(), r)
	}
	baseAll.finish()
	baseAll.Notes = append(baseAll.Notes, "the baseline row adds up every baseline slice of the run: the opening run and the slices interleaved with each scenario")
	rep.Results = append([]Result{baseAll}, results...)
	return nil
}

// scenarios prepares every scenario after the baseline: a scenario that cannot be prepared
// is reported as failed and not measured. It returns the result rows, the trials to measure,
// and for each trial the index of its row.
func (m *measurement) scenarios(suite *Suite, base *Scenario) (results []Result, trials []*trial, placed []int, err error) {
	results = make([]Result, len(suite.Scenarios)-1)
	for i := 1; i < len(suite.Scenarios); i++ {
		if err := m.ctx.Err(); err != nil {
			return nil, nil, nil, err
		}
		sc := &suite.Scenarios[i]
		p, res, err := m.prepare(sc)
		if err != nil {
			res.Failure = err.Error()
			logf("%-22s FAILED before load: %s", sc.Name, oneLine(err.Error(), 300))
		}
		results[i-1] = res
		if err != nil {
			continue
		}
		trials = append(trials, newTrial(sc, p, base))
		placed = append(placed, i-1)
	}
	return results, trials, placed, nil
}

// withFloors returns the order of the rounds: with -floor, every scenario with a target (on
// a cache hit) is followed by its floor trial, so that both see the same phases of the
// machine; the floors are also returned.
func (m *measurement) withFloors(trials []*trial, base *Scenario) (order, floors []*trial, err error) {
	if !m.f.floor {
		return trials, nil, nil
	}
	for _, t := range trials {
		order = append(order, t)
		if t.sc.Target == nil || t.sc.Cache == "miss" {
			continue
		}
		ft, err := m.e.startFloor(m.ctx, t, base, m.floorBin, m.tmp, m.f.serverEnv, m.procs)
		if err != nil {
			return nil, nil, fmt.Errorf("floor of %s: %w", t.sc.Name, err)
		}
		conn := ft.env.replicas[0].conn
		m.closers.add(func() { conn.Close() })
		logf("floor of %s serving on %s", t.sc.Name, ft.env.host)
		floors = append(floors, ft)
		order = append(order, ft)
	}
	return order, floors, nil
}

// logResult prints a measured trial's summary line; r.Baseline must be set.
func logResult(label string, r *Result) {
	rr, pr := r.ratios(nil)
	logf("%-32s %8d req %8.0f RPS  p50 %-9s p99 %-9s errors %d  cpu/req server %s client %s  vs baseline %.0f RPS: ratio %.2f, p99 ratio %.2f",
		label, r.Requests, r.RPS(), fmtDur(r.P50), fmtDur(r.P99), r.Errors, r.ServerCPUPerRequest(), r.ClientCPUPerRequest(), r.Baseline.RPS(), rr, pr)
}

// envList is a repeatable KEY=VALUE flag.
type envList []string

func (l *envList) String() string { return strings.Join(*l, " ") }

func (l *envList) Set(s string) error {
	if k, _, ok := strings.Cut(s, "="); !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", s)
	}
	*l = append(*l, s)
	return nil
}

// register defines the command line's flags on fs, storing into f.
func (f *flags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.scenarios, "scenarios", "scenarios.yaml", "scenario file")
	fs.StringVar(&f.out, "out", "", "report path (default results/loadtest-<N>-replicas.md, rewritten by every run)")
	fs.IntVar(&f.replicas, "replicas", 1, "compactord replicas; ghz balances round-robin over them (on a 2-core box more replicas measure the scheduler more than the server)")
	fs.BoolVar(&f.redis, "redis", true, "share a throwaway redis-server as the summary cache (false: each replica's in-memory cache; needs -replicas 1)")
	fs.StringVar(&f.bin, "bin", "", "compactord binary (default: build ../cmd/compactord into the temp dir)")
	fs.DurationVar(&f.duration, "duration", 0, "measured duration of every scenario (default: from the scenario file)")
	fs.DurationVar(&f.warmup, "warmup", -1, "unmeasured warm-up before every scenario (default, -1: from the scenario file)")
	fs.IntVar(&f.slices, "slices", 0, "measured slices of every scenario, each after a baseline slice (default: from the scenario file)")
	fs.UintVar(&f.concurrency, "concurrency", 0, "ghz workers for every scenario (default: from the scenario file)")
	fs.StringVar(&f.only, "only", "", "run only the scenarios matching this regexp (the baseline always runs)")
	fs.DurationVar(&f.soak, "soak", 0, "measure the scenarios round after round for at least this long, sampling the servers' memory after every slice (e.g. 5m)")
	fs.DurationVar(&f.llmLatency, "llm-latency", 50*time.Millisecond, "fixed latency of the fake LLM")
	fs.Var(&f.serverEnv, "server-env", "KEY=VALUE added to every replica's environment (repeatable; e.g. GOGC=400)")
	fs.Var(&f.serverArgs, "server-arg", "flag added to every replica's command line (repeatable; e.g. --token-memo-bytes=4MiB)")
	fs.DurationVar(&f.soakFill, "soak-fill", 15*time.Second, "before the soak, run the cache-miss scenarios this long so the bounded stores are full (0: no fill)")
	fs.BoolVar(&f.floor, "floor", true, "measure every scenario with a target also against loadtest/floorserver (compactord's gRPC stack answering with compactord's response and doing no work), in the same rounds")
	fs.BoolVar(&f.keep, "keep", false, "keep the temp dir (payload JSON, server logs, config)")
	fs.BoolVar(&f.chaos, "chaos", false, "run the chaos scenarios instead of the load test: faults in Redis, a replica and the LLM under load against three replicas (writes results/chaos.md; -only picks scenarios by name)")
	fs.BoolVar(&f.shed, "shed", false, "measure load shedding instead of the scenarios: unloaded, saturated and 4× overloaded Plan calls against one replica with --max-inflight (writes results/shedding.md)")
	fs.StringVar(&f.shedMax, "shed-max-inflight", "1,4,64", "with -shed: the replica's --max-inflight, one measurement per comma-separated bound")
	fs.DurationVar(&f.shedDuration, "shed-duration", 10*time.Second, "with -shed: the measured duration of each phase")
	fs.BoolVar(&f.prepared, "prepared", false, "measure Compact at the trigger with and without a prepared summary instead of the scenarios (writes results/prepared.md; set -llm-latency to a model's, e.g. 5s)")
	fs.IntVar(&f.preparedCalls, "prepared-calls", 64, "with -prepared: the Compacts measured in each phase")
	fs.StringVar(&f.shedConversation, "shed-conversation", "fixture-swe-units.openai.json", "with -shed: the conversation whose Plan is sent: a fixture of internal/corpus/testdata, else a file of the real corpus")
}

// argList is a repeatable flag whose values are kept as given, in order.
type argList []string

func (l *argList) String() string { return strings.Join(*l, " ") }

func (l *argList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// applyOverrides applies the command-line load settings and the -only filter.
func applyOverrides(s *Suite, f flags) error {
	var only *regexp.Regexp
	if f.only != "" {
		var err error
		if only, err = regexp.Compile(f.only); err != nil {
			return fmt.Errorf("-only: %w", err)
		}
	}
	kept := s.Scenarios[:0]
	for i, sc := range s.Scenarios {
		if i > 0 && only != nil && !only.MatchString(sc.Name) {
			continue
		}
		if f.duration > 0 {
			sc.Duration = Duration(f.duration)
		}
		if f.warmup >= 0 {
			sc.Warmup = Duration(f.warmup)
		}
		if f.concurrency > 0 {
			sc.Concurrency = f.concurrency
		}
		if f.slices > 0 {
			sc.Slices = f.slices
		}
		if err := sc.check(); err != nil {
			return fmt.Errorf("scenario %q with the command-line settings: %w", sc.Name, err)
		}
		kept = append(kept, sc)
	}
	s.Scenarios = kept
	return nil
}

// serverConfig is the --config file: the fake LLM as an OpenAI-compatible summarizer.
func serverConfig(baseURL string) string {
	return fmt.Sprintf(`# written by loadtest: the fake LLM on loopback
summarizers:
  - name: fake-llm
    kind: openai
    base_url: %s
    model: fake-summarizer
    api_key_env: LOADTEST_FAKE_LLM_KEY
    timeout: 10s
    max_output_tokens: 512
`, baseURL)
}

func describePayload(sc *Scenario, p *Payload) string {
	var parts []string
	switch {
	case sc.Conversation != nil:
		parts = append(parts, fmt.Sprintf("`%s`, %d of %d messages", sc.Conversation.File, p.Messages, p.Of))
	case sc.Body != nil:
		parts = append(parts, fmt.Sprintf("body `%s`", sc.Body.File))
	}
	if js, err := sc.requestJSON(); err == nil && string(js) != "{}" {
		parts = append(parts, "request "+"`"+string(js)+"`")
	}
	parts = append(parts, fmt.Sprintf("%.1f KiB per request", float64(p.Bytes)/1024))
	return strings.Join(parts, ", ")
}

func replicaProcs(e *env) []*proc {
	out := make([]*proc, len(e.replicas))
	for i, r := range e.replicas {
		out[i] = r.proc
	}
	return out
}

func redisProcs(ps []*proc) []*proc {
	var out []*proc
	for _, p := range ps {
		if p.name == "redis" {
			out = append(out, p)
		}
	}
	return out
}

func gitDescribe(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	s := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		s += " (with uncommitted changes in the work tree)"
	}
	return s
}

func redisVersion() string {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "redis-server"
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return "redis-server " + v
		}
	}
	return "redis-server"
}

// defaultReport is the report of a run with n replicas: one file per topology, so the
// results directory holds the latest report of each kind.
func defaultReport(n int) string {
	return filepath.Join("results", fmt.Sprintf("loadtest-%d-replicas.md", n))
}

// findRepoRoot is the repository the driver runs in: the parent of loadtest/.
func findRepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root := filepath.Dir(wd)
	if _, err := os.Stat(filepath.Join(root, "cmd", "compactord")); err != nil {
		return "", fmt.Errorf("run from loadtest/ inside the repository: %w", err)
	}
	return root, nil
}

// serverBinary is bin when given, else compactord built from repoRoot into dir.
func serverBinary(ctx context.Context, bin, repoRoot, dir string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	bin = filepath.Join(dir, "compactord")
	logf("building compactord")
	// Built with the go command's defaults, not the release flags (-trimpath,
	// CGO_ENABLED=0, which change nothing on the paths measured here), so that the build
	// shares compiled packages with the driver's own (gRPC, protobuf): on a new machine
	// it takes 1m48s instead of 2m11s.
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/compactord")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building compactord: %w\n%s", err, out)
	}
	return bin, nil
}

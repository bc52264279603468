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

// run does the whole load test and reports whether it had zero errors.
func run(ctx context.Context, f flags) (bool, error) {
	started := time.Now()
	if f.replicas < 1 || f.replicas > 8 {
		return false, errors.New("-replicas must be 1..8")
	}
	if !f.redis && f.replicas > 1 {
		return false, errors.New("-redis=false needs -replicas 1: replicas share summaries only through Redis")
	}
	sf, err := os.Open(f.scenarios)
	if err != nil {
		return false, err
	}
	suite, err := ParseSuite(sf)
	sf.Close()
	if err != nil {
		return false, err
	}
	if err := applyOverrides(suite, f); err != nil {
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

	// Everything started from here on is stopped on the way out, newest first.
	var procs []*proc
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop(5 * time.Second)
		}
	}()

	llm := &FakeLLM{Latency: f.llmLatency}
	if err := llm.Start(); err != nil {
		return false, err
	}
	defer llm.Close()
	cfgPath := filepath.Join(tmp, "compactord.yaml")
	if err := os.WriteFile(cfgPath, []byte(serverConfig(llm.BaseURL())), 0o600); err != nil {
		return false, err
	}

	topology := fmt.Sprintf("%d replica(s), in-memory summary cache", f.replicas)
	serverArgs := []string{
		"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--drain-timeout", "2s",
		"--config", cfgPath,
	}
	if f.redis {
		rp, raddr, err := startRedis(ctx, tmp)
		if err != nil {
			return false, err
		}
		procs = append(procs, rp)
		serverArgs = append(serverArgs, "--redis-url", "redis://"+raddr+"/0")
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
		serverArgs = append(serverArgs, f.serverArgs...)
		topology += "; replica flags add " + strings.Join(f.serverArgs, " ")
	}
	e := &env{llm: llm}
	for i := 0; i < f.replicas; i++ {
		name := fmt.Sprintf("replica-%d", i+1)
		p, addr, err := startProc(ctx, tmp, name, "serving", bin, serverArgs,
			append([]string{"LOADTEST_FAKE_LLM_KEY=fake-key", "OTEL_TRACES_EXPORTER=none"}, f.serverEnv...))
		if err != nil {
			return false, err
		}
		procs = append(procs, p)
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			return false, err
		}
		defer conn.Close()
		maddr := p.loggedAddr("metrics")
		if maddr == "" {
			return false, fmt.Errorf("%s logged no metrics address", name)
		}
		e.replicas = append(e.replicas, &replica{name: name, addr: addr, metrics: maddr, proc: p, conn: conn})
		logf("%s serving on %s (pid %d)", name, addr, p.cmd.Process.Pid)
	}
	addrs := make([]resolver.Address, len(e.replicas))
	for i, r := range e.replicas {
		addrs[i] = resolver.Address{Addr: r.addr}
	}
	rb := manual.NewBuilderWithScheme("loadtest")
	rb.InitialState(resolver.State{Addresses: addrs})
	resolver.Register(rb)
	e.host = "loadtest:///compactord"
	if e.protoset, err = descriptorSet(); err != nil {
		return false, err
	}

	mem := make([]MemRow, 0, len(procs))
	memProcs := append(replicaProcs(e), redisProcs(procs)...)
	for _, p := range memProcs {
		k, err := rssKiB(p.cmd.Process.Pid)
		if err != nil {
			return false, fmt.Errorf("reading RSS of %s: %w", p.name, err)
		}
		mem = append(mem, MemRow{Process: p.name, StartKiB: k, PeakSample: k})
	}
	sampleMem := func() []int64 {
		out := make([]int64, len(memProcs))
		for i, p := range memProcs {
			if k, err := rssKiB(p.cmd.Process.Pid); err == nil {
				out[i] = k
				mem[i].PeakSample = max(mem[i].PeakSample, k)
			}
		}
		return out
	}

	rep := &Report{
		Date:     started,
		Command:  "cd loadtest && go run . " + strings.Join(os.Args[1:], " "),
		Commit:   gitDescribe(repoRoot),
		Env:      fmt.Sprintf("%s %s/%s, %d CPUs (load generator and servers share them), ghz runner v0.121.0", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU()),
		Topology: topology,
	}

	// prepare builds a scenario's payload and makes its preflight calls.
	prepare := func(sc *Scenario) (*Payload, Result, error) {
		res := Result{Name: sc.Name, Call: sc.Call, Concurrency: sc.Concurrency, Target: sc.Target}
		p, err := buildPayload(ctx, e.replicas[0].conn, corpus, sc)
		if err != nil {
			return nil, res, err
		}
		res.Payload = describePayload(sc, p)
		if f.keep {
			if _, err := writePayload(tmp, sc.Name, p.Request); err != nil {
				return nil, res, err
			}
		}
		res.Notes, err = e.preflight(ctx, sc, p)
		return p, res, err
	}
	base := &suite.Scenarios[0]
	bp, baseAll, err := prepare(base)
	if err != nil {
		return false, fmt.Errorf("baseline %s: %w", base.Name, err)
	}
	// The baseline alone first: it warms the servers up and stands for the whole run even
	// when no other scenario can run. Every scenario's slices then alternate with baseline
	// slices, and all baseline slices add up to the baseline row.
	opening := newTrial(base, bp, nil)
	if err := e.rounds(ctx, []*trial{opening}, nil, nil, nil, sampleMem); err != nil {
		return false, err
	}
	opening.finish()
	baseAll.add(opening.r)
	results := make([]Result, len(suite.Scenarios)-1)
	var trials []*trial
	var placed []int // trials[i] reports in results[placed[i]]
	for i := 1; i < len(suite.Scenarios); i++ {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		sc := &suite.Scenarios[i]
		p, res, err := prepare(sc)
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
	// With -floor, every scenario with a target has a floor trial right after its own in
	// each round, so that both see the same phases of the machine.
	var floors []*trial
	order := trials
	if f.floor {
		order = nil
		for _, t := range trials {
			order = append(order, t)
			if t.sc.Target == nil || t.sc.Cache == "miss" {
				continue
			}
			ft, err := e.startFloor(ctx, t, base, floorBin, tmp, f.serverEnv, &procs)
			if err != nil {
				return false, fmt.Errorf("floor of %s: %w", t.sc.Name, err)
			}
			defer ft.env.replicas[0].conn.Close()
			logf("floor of %s serving on %s", t.sc.Name, ft.env.host)
			floors = append(floors, ft)
			order = append(order, ft)
		}
		rep.FloorModules = floorModules
	}
	if f.soak > 0 && len(trials) > 0 {
		rep.Soak = &Soak{Duration: f.soak, MaxGrowth: 1.2}
		if err := e.fill(ctx, trials, f.soakFill, rep.Soak); err != nil {
			return false, err
		}
		logf("soak: every scenario after a baseline slice, round after round, for %s", f.soak)
	}
	if err := e.rounds(ctx, order, base, bp, rep.Soak, sampleMem); err != nil {
		return false, err
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

	end := sampleMem()
	for i := range mem {
		mem[i].EndKiB = end[i]
	}
	rep.Memory = mem
	rep.Notes = append(rep.Notes,
		"RPS counts every call of the measured run over its wall time; the warm-up before each scenario is not counted.",
		"Percentiles are nearest-rank over the calls that returned OK, measured by the ghz client (queueing in the client included).",
		"Requests are built from the real corpus (COMPACTORD_CORPUS, else ../shared/corpus/real), lifted by the server's own Lift RPC and cut at a turn boundary; ghz sends them as binary protobuf.",
		"Cache-miss requests differ only in a marker prepended to the first user message, so every call has a new prefix hash and makes one summarizer call.",
		fmt.Sprintf("Total driver wall time: %s.", time.Since(started).Round(time.Second)),
	)

	out := f.out
	if out == "" {
		out = defaultReport(f.replicas)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return false, err
	}
	if err := os.WriteFile(out, []byte(rep.Markdown()), 0o644); err != nil {
		return false, err
	}
	logf("wrote %s (%s)", out, time.Since(started).Round(time.Second))
	return rep.OK(), nil
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

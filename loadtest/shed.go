package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bojand/ghz/runner"
	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// Load shedding (SECURITY.md, "Load shedding"): one replica with --max-inflight, driven by
// ghz through three phases with the same Plan request:
//
//  1. unloaded: one worker, the latency a call has when nothing waits;
//  2. saturated: as many closed-loop workers as the bound, the throughput the server can
//     serve (X);
//  3. overloaded: an open-loop rate of 4 × X with a 1 s deadline per call.
//
// The bound holds when the calls admitted in phase 3 keep a p99 at most 2 × the unloaded
// p99, no call reaches its deadline, and every refusal is UNAVAILABLE and counted in
// compactord_shed_total.
type shedPhase struct {
	name        string
	concurrency uint
	rps         uint // 0: closed loop
	d           time.Duration
}

type shedResult struct {
	phase             shedPhase
	elapsed           time.Duration
	ok, refused       int
	deadline, other   int
	p50, p99, p99_9   time.Duration
	otherErrs         map[string]int
	serverCPU, client time.Duration
}

// shedDeadline is phase 3's per-call deadline.
const shedDeadline = time.Second

// shedRun is the measurement of one bound.
type shedRun struct {
	bound    int
	capacity float64
	results  []*shedResult
	ratio    float64
	counted  float64
	held     bool
}

// runShed measures load shedding at every bound of -shed-max-inflight and writes
// results/shedding.md. It reports whether the goal held at every bound.
func runShed(ctx context.Context, f flags) (bool, error) {
	repoRoot, err := findRepoRoot()
	if err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp("", "compactord-shed")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	if f.bin, err = serverBinary(ctx, f.bin, repoRoot, tmp); err != nil { // once for every bound
		return false, err
	}
	var runs []*shedRun
	all := true
	for _, field := range strings.Split(f.shedMax, ",") {
		bound, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || bound < 1 {
			return false, fmt.Errorf("-shed-max-inflight: %q is not a positive bound", field)
		}
		r, err := shedBound(ctx, f, bound)
		if err != nil {
			return false, err
		}
		runs = append(runs, r)
		all = all && r.held
	}
	out := f.out
	if out == "" {
		out = filepath.Join("results", "shedding.md")
	}
	if err := os.WriteFile(out, []byte(shedReport(f, runs, gitDescribe(repoRoot))), 0o644); err != nil {
		return false, err
	}
	logf("wrote %s", out)
	return all, nil
}

// shedBound measures one replica with --max-inflight bound.
func shedBound(ctx context.Context, f flags, bound int) (*shedRun, error) {
	repoRoot, err := findRepoRoot()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "compactord-shed")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	args := append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--drain-timeout", "2s",
		"--max-inflight", strconv.Itoa(bound)}, f.serverArgs...)
	p, addr, err := startProc(ctx, tmp, "compactord", "serving", f.bin, args, f.serverEnv)
	if err != nil {
		return nil, err
	}
	defer p.stop(5 * time.Second)
	metricsAddr := p.loggedAddr("metrics")

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	dir := filepath.Join(repoRoot, "internal", "corpus", "testdata")
	if _, err := os.Stat(filepath.Join(dir, f.shedConversation)); err != nil {
		if dir, err = corpusDir(repoRoot); err != nil {
			return nil, err
		}
	}
	msgs, err := liftCorpus(ctx, conn, dir, f.shedConversation)
	if err != nil {
		return nil, err
	}
	req := &compactorv1.PlanRequest{Messages: msgs, Policy: &compactorv1.Policy{ContextWindow: 8000}}
	body, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	set, err := descriptorSet()
	if err != nil {
		return nil, err
	}
	drive := func(ph shedPhase, timeout time.Duration) (*shedResult, error) {
		opts := []runner.Option{
			runner.WithProtosetBinary(set), runner.WithInsecure(true),
			runner.WithConcurrency(ph.concurrency), runner.WithRunDuration(ph.d),
			runner.WithDurationStopAction("wait"), runner.WithTimeout(timeout),
			runner.WithBinaryData(body), runner.WithName(ph.name),
			runner.WithDisableTemplateData(true), runner.WithDisableTemplateFuncs(true),
		}
		// Requests are marshalled once and responses not decoded: ghz's own per-call cost
		// would otherwise exceed the server's, and one machine could not offer 4×.
		opts = append(opts, runner.WithDefaultCallOptions(newLoadCodec(true).callOptions()))
		if ph.rps > 0 {
			opts = append(opts, runner.WithRPS(ph.rps))
		} else {
			opts = append(opts, runner.WithWorkerTicker(newConstWorkers(ph.concurrency)))
		}
		srv0, cli0 := procCPU(p), selfCPU()
		rep, err := runner.Run("compactor.v1.CompactorService.Plan", addr, opts...)
		rearmSignals()
		if err != nil {
			return nil, fmt.Errorf("ghz %s: %s", ph.name, oneLine(err.Error(), 300))
		}
		r := shedSummary(ph, rep)
		r.serverCPU, r.client = procCPU(p)-srv0, selfCPU()-cli0
		logf("%s: %d ok, %d refused, %d deadline, p99 %v", ph.name, r.ok, r.refused, r.deadline, r.p99)
		return r, nil
	}

	// Warm up, then the three phases.
	if _, err := drive(shedPhase{"warm-up", uint(bound), 0, 2 * time.Second}, shedDeadline); err != nil {
		return nil, err
	}
	unloaded, err := drive(shedPhase{"unloaded", 1, 0, f.shedDuration}, shedDeadline)
	if err != nil {
		return nil, err
	}
	saturated, err := drive(shedPhase{"saturated", uint(bound), 0, f.shedDuration}, shedDeadline)
	if err != nil {
		return nil, err
	}
	capacity := float64(saturated.ok) / saturated.elapsed.Seconds()
	shed0, err := scrapeCounter(ctx, metricsAddr, `compactord_shed_total{kind="cpu"}`)
	if err != nil {
		return nil, err
	}
	over := shedPhase{"overloaded (4× capacity)", 4 * uint(bound) * 4, uint(4 * capacity), f.shedDuration}
	overloaded, err := drive(over, shedDeadline)
	if err != nil {
		return nil, err
	}
	shed1, err := scrapeCounter(ctx, metricsAddr, `compactord_shed_total{kind="cpu"}`)
	if err != nil {
		return nil, err
	}
	ratio := float64(overloaded.p99) / float64(unloaded.p99)
	r := &shedRun{bound: bound, capacity: capacity, results: []*shedResult{unloaded, saturated, overloaded},
		ratio: ratio, counted: shed1 - shed0}
	r.held = ratio <= 2 && overloaded.deadline == 0 && overloaded.other == 0 && int(r.counted) == overloaded.refused
	logf("bound %d: admitted p99 %.2f × unloaded, %d deadline, %d refused (%.0f counted by the server)",
		bound, ratio, overloaded.deadline, overloaded.refused, r.counted)
	return r, nil
}

func procCPU(p *proc) time.Duration {
	t, _ := cpuTime(p.cmd.Process.Pid)
	return t
}

// shedSummary counts a phase's outcomes: OK, refused (UNAVAILABLE), deadline, other.
func shedSummary(ph shedPhase, rep *runner.Report) *shedResult {
	r := &shedResult{phase: ph, elapsed: rep.Total, otherErrs: map[string]int{}}
	var lat []time.Duration
	for _, d := range rep.Details {
		switch {
		case d.Error == "":
			r.ok++
			lat = append(lat, d.Latency)
		case d.Status == "Unavailable":
			r.refused++
		case d.Status == "DeadlineExceeded":
			r.deadline++
		default:
			r.other++
			r.otherErrs[d.Status+": "+oneLine(d.Error, 80)]++
		}
	}
	slices.Sort(lat)
	at := func(q float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(q*float64(len(lat))))]
	}
	r.p50, r.p99, r.p99_9 = at(0.5), at(0.99), at(0.999)
	return r
}

// scrapeCounter reads one series' value from a /metrics endpoint.
func scrapeCounter(ctx context.Context, addr, series string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("%s: no series %s", addr, series)
}

func shedReport(f flags, runs []*shedRun, rev string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Load shedding\n\nCommand: `cd loadtest && go run . -shed -shed-max-inflight %s -shed-conversation %s -shed-duration %v` (%s), %s, GOMAXPROCS %d, %s; ghz on the same machine.\n\n",
		f.shedMax, f.shedConversation, f.shedDuration, rev, time.Now().UTC().Format("2006-01-02"), runtime.GOMAXPROCS(0), cpuModel())
	fmt.Fprintf(&b, "Per bound: one replica with `--max-inflight <bound>`, Plan of `%s`. Unloaded: one worker. Saturated: closed loop with as many workers as the bound; its throughput is the capacity. "+
		"Overloaded: an open-loop 4 × capacity with a %v deadline per call. Goal: admitted p99 ≤ 2 × unloaded p99, no deadline reached, every refusal UNAVAILABLE and counted.\n\n",
		f.shedConversation, shedDeadline)
	fmt.Fprintf(&b, "| bound | capacity/s | admitted p99 / unloaded p99 | deadline exceeded | refused (ghz) | counted by the server | goal |\n|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		over := r.results[len(r.results)-1]
		goal := "held"
		if !r.held {
			goal = "not held"
		}
		fmt.Fprintf(&b, "| %d | %.0f | %.2f | %d | %d | %.0f | %s |\n", r.bound, r.capacity, r.ratio, over.deadline, over.refused, r.counted, goal)
	}
	for _, r := range runs {
		fmt.Fprintf(&b, "\n## --max-inflight %d\n\n", r.bound)
		fmt.Fprintf(&b, "| phase | workers | offered/s | done/s | OK | refused (UNAVAILABLE) | deadline exceeded | other errors | p50 OK | p99 OK | p99.9 OK | server CPU | ghz CPU |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, x := range r.results {
			offered := "closed loop"
			if x.phase.rps > 0 {
				offered = strconv.Itoa(int(x.phase.rps))
			}
			done := float64(x.ok+x.refused+x.deadline+x.other) / x.elapsed.Seconds()
			fmt.Fprintf(&b, "| %s | %d | %s | %.0f | %d | %d | %d | %d | %v | %v | %v | %v | %v |\n", x.phase.name, x.phase.concurrency, offered, done,
				x.ok, x.refused, x.deadline, x.other, x.p50.Round(time.Microsecond), x.p99.Round(time.Microsecond), x.p99_9.Round(time.Microsecond),
				x.serverCPU.Round(time.Millisecond), x.client.Round(time.Millisecond))
		}
		for e, n := range r.results[len(r.results)-1].otherErrs {
			fmt.Fprintf(&b, "\n- other error ×%d: %s", n, e)
		}
	}
	return b.String()
}

// cpuModel is the machine's CPU model, for the report.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "model name\t: "); ok {
			return v
		}
	}
	return runtime.GOARCH
}

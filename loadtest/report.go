package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Result is one measured load run of a scenario.
type Result struct {
	Name        string
	Call        string
	Concurrency uint
	// Elapsed is the wall time of the measured run, in-flight calls included.
	Elapsed  time.Duration
	Requests uint64
	// Errors counts the calls that did not return OK; ErrorDist groups them by message.
	Errors    uint64
	ErrorDist map[string]int
	// P50, P95 and P99 are latency percentiles (nearest rank) of the calls that returned OK.
	P50, P95, P99 time.Duration
	// ServerCPU is the CPU time the replicas used during the measured run (the fake LLM
	// and Redis excluded); ClientCPU is the driver's (ghz).
	ServerCPU, ClientCPU time.Duration
	// Payload describes the request sent.
	Payload string
	// Target is the scenario's pass mark, nil when it only reports.
	Target *Target
	// Baseline is the baseline measured in the slices interleaved with this scenario's; the
	// ratios are against it. Nil for the baseline itself.
	Baseline *Result
	// SliceRatios are the RPS ratios of each slice to the baseline slice run just before it;
	// their median is the scenario's RPS ratio (robust to one slice hit by a stall).
	SliceRatios []float64
	// Failure, when set, is why the scenario could not run (preflight call failed, ...).
	Failure string
	// Notes are checks made around the run (cache statuses seen, fake LLM calls counted).
	Notes []string

	lat []time.Duration // latencies of the OK calls, until finish
}

// add merges another run of the same scenario into r (Elapsed and counts add up); call
// finish once all are in.
func (r *Result) add(o *Result) {
	r.Elapsed += o.Elapsed
	r.Requests += o.Requests
	r.Errors += o.Errors
	r.ServerCPU += o.ServerCPU
	r.ClientCPU += o.ClientCPU
	if r.ErrorDist == nil {
		r.ErrorDist = map[string]int{}
	}
	for k, n := range o.ErrorDist {
		r.ErrorDist[k] += n
	}
	r.lat = append(r.lat, o.lat...)
}

// finish computes the percentiles of the latencies gathered so far.
func (r *Result) finish() {
	ps := percentiles(r.lat, 0.50, 0.95, 0.99)
	r.P50, r.P95, r.P99 = ps[0], ps[1], ps[2]
}

// RPS is requests per second of wall time.
func (r *Result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// ServerCPUPerRequest is the replicas' CPU time per call.
func (r *Result) ServerCPUPerRequest() time.Duration {
	if r.Requests == 0 {
		return 0
	}
	return r.ServerCPU / time.Duration(r.Requests)
}

// ClientCPUPerRequest is the load generator's CPU time per call.
func (r *Result) ClientCPUPerRequest() time.Duration {
	if r.Requests == 0 {
		return 0
	}
	return r.ClientCPU / time.Duration(r.Requests)
}

// percentiles returns the nearest-rank percentiles ps (in [0,1]) of lat, sorting lat.
func percentiles(lat []time.Duration, ps ...float64) []time.Duration {
	out := make([]time.Duration, len(ps))
	if len(lat) == 0 {
		return out
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	for i, p := range ps {
		k := int(math.Ceil(p*float64(len(lat)))) - 1
		k = max(0, min(k, len(lat)-1))
		out[i] = lat[k]
	}
	return out
}

// median of xs (which it does not modify); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ratioRange is "min–max" of the slice ratios, or "" with fewer than two.
func (r *Result) ratioRange() string {
	if len(r.SliceRatios) < 2 {
		return ""
	}
	lo, hi := r.SliceRatios[0], r.SliceRatios[0]
	for _, x := range r.SliceRatios {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf(" (%.2f–%.2f)", lo, hi)
}

// Verdict is a scenario's outcome against its target, relative to the baseline b.
func (r *Result) Verdict(b *Result) (ok bool, text string) {
	switch {
	case r.Failure != "":
		return false, "**FAILED** (did not run)"
	case r.Requests == 0:
		return false, "**FAIL** (no requests)"
	case r.Errors > 0:
		return false, fmt.Sprintf("**FAIL** (%d errors)", r.Errors)
	case r.Target == nil:
		return true, "—"
	}
	rr, pr := r.ratios(b)
	var miss []string
	if rr < r.Target.RPSRatio {
		miss = append(miss, "RPS ratio "+compared(rr, "<", r.Target.RPSRatio))
	}
	if r.Target.P99Ratio > 0 && pr > r.Target.P99Ratio {
		miss = append(miss, "p99 ratio "+compared(pr, ">", r.Target.P99Ratio))
	}
	if len(miss) > 0 {
		return false, "**FAIL** (" + strings.Join(miss, ", ") + ")"
	}
	return true, "pass"
}

// compared is "x op y" with two decimals, or three where two would print the same number
// on both sides (0.599 < 0.600, not 0.60 < 0.60).
func compared(x float64, op string, y float64) string {
	f := "%.2f %s %.2f"
	if fmt.Sprintf("%.2f", x) == fmt.Sprintf("%.2f", y) {
		f = "%.3f %s %.3f"
	}
	return fmt.Sprintf(f, x, op, y)
}

// ratios are RPS / baseline RPS and p99 / baseline p99 (0 when the baseline has none).
func (r *Result) ratios(b *Result) (rps, p99 float64) {
	if r.Baseline != nil {
		b = r.Baseline
	}
	if b == nil {
		return 0, 0
	}
	if len(r.SliceRatios) > 0 {
		rps = median(r.SliceRatios)
	} else if b.RPS() > 0 {
		rps = r.RPS() / b.RPS()
	}
	if b.P99 > 0 {
		p99 = float64(r.P99) / float64(b.P99)
	}
	return rps, p99
}

// String is the target as a table cell ("—" for none).
func (t *Target) String() string {
	if t == nil {
		return "—"
	}
	s := fmt.Sprintf("RPS ≥ %.2f×", t.RPSRatio)
	if t.P99Ratio > 0 {
		s += fmt.Sprintf(", p99 ≤ %g×", t.P99Ratio)
	}
	return s
}

// MemRow is the resident memory of one process the driver started.
type MemRow struct {
	Process    string
	StartKiB   int64 // after start-up, before any load
	EndKiB     int64 // after the last scenario (and the soak, when run)
	PeakSample int64 // largest sample taken between scenarios
}

// SoakSample is the state after one scenario slice of the soak.
type SoakSample struct {
	Elapsed  time.Duration
	Scenario string
	Requests uint64
	Errors   uint64
	RSSKiB   []int64     // per server process, in Report.Memory order
	Heap     []heapState // per replica: live heap and stores, from its /metrics
}

// SoakFill is the run of a cache-miss scenario before the soak that fills the bounded stores.
type SoakFill struct {
	Scenario         string
	Concurrency      uint // calls in flight
	Duration         time.Duration
	Requests, Errors uint64
	Heap             []heapState // per replica, after the fill
}

// Soak is the memory-flatness run: the scenarios measured round after round, each slice
// right after a baseline slice, RSS sampled after each.
type Soak struct {
	Duration time.Duration // how long the rounds must last; once run, how long they lasted
	Rounds   int           // rounds started
	Partial  bool          // the last round stopped part-way, at the soak's end
	Fill     []SoakFill
	Samples  []SoakSample
	// RefIndex is the sample the end is compared with: the first slice of the same scenario
	// as the last one, so both samples follow the same kind of load.
	RefIndex int
	// MaxGrowth is the largest end/reference RSS ratio that counts as flat.
	MaxGrowth float64
}

// Report is everything the results file says.
type Report struct {
	Date     time.Time
	Command  string
	Commit   string
	Env      string
	Topology string
	// Results has the baseline first.
	Results []Result
	Memory  []MemRow
	Soak    *Soak
	Notes   []string
	// Floor has the scenarios with a target as measured against the floor server
	// (loadtest/floorserver), each with the baseline slices it ran after; FloorModules names
	// the toolchain and module versions the floor server shares with compactord.
	Floor        []Result
	FloorModules string
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "—"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < 10*time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func fmtMicros(d time.Duration) string {
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

func fmtMiB(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

// OK reports whether every scenario ran without errors (targets aside).
func (rep *Report) OK() bool {
	for i := range rep.Results {
		r := &rep.Results[i]
		if r.Failure != "" || r.Errors > 0 || r.Requests == 0 {
			return false
		}
	}
	for i := range rep.Floor {
		if r := &rep.Floor[i]; r.Errors > 0 || r.Requests == 0 {
			return false
		}
	}
	if s := rep.Soak; s != nil {
		for _, x := range s.Samples {
			if x.Errors > 0 {
				return false
			}
		}
		for _, f := range s.Fill {
			if f.Errors > 0 {
				return false
			}
		}
	}
	return true
}

// TargetsMet reports whether every scenario with a target passed it.
func (rep *Report) TargetsMet() bool {
	b := rep.baseline()
	for i := range rep.Results {
		if ok, _ := rep.Results[i].Verdict(b); !ok {
			return false
		}
	}
	return true
}

func (rep *Report) baseline() *Result {
	if len(rep.Results) == 0 {
		return nil
	}
	return &rep.Results[0]
}

// Markdown renders the report.
func (rep *Report) Markdown() string {
	var w strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&w, format, a...) }
	b := rep.baseline()
	p("# compactord load test, %s\n\n", rep.Date.UTC().Format("2006-01-02 15:04 MST"))
	p("- command: `%s`\n", rep.Command)
	p("- commit: %s\n", rep.Commit)
	p("- machine: %s\n", rep.Env)
	p("- servers: %s\n", rep.Topology)
	if b != nil {
		p("- baseline: `%s` (%s), measured in the same run; ratios below are against it\n", b.Name, b.Call)
	}
	errs := "zero errors"
	if !rep.OK() {
		errs = "**errors or failed scenarios: see below**"
	}
	targets := "every target met"
	if !rep.TargetsMet() {
		targets = "**some targets missed**"
	}
	p("- outcome: %s; %s\n\n", errs, targets)

	p("## Scenarios\n\n")
	p("Each scenario's measured time is split into slices, each run right after an equally long slice of the baseline; its ratios are against those interleaved baseline slices (column \"baseline RPS\"), so both saw the same background load. The RPS ratio is the median of the per-slice ratios (range in parentheses); the p99 ratio compares all the scenario's calls with all its baseline slices' calls. Server CPU is the replicas' user+system time per call.\n\n")
	p("| scenario | call | conc. | duration | requests | RPS | p50 | p95 | p99 | errors | server CPU/call | baseline RPS | RPS ratio | p99 ratio | target | result |\n")
	p("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|\n")
	for i := range rep.Results {
		r := &rep.Results[i]
		name := r.Name
		if i == 0 {
			name += " (baseline)"
		}
		_, v := r.Verdict(b)
		if r.Failure != "" {
			p("| %s | %s | %d | — | — | — | — | — | — | — | — | — | — | — | %s | %s |\n", name, shortCall(r.Call), r.Concurrency, r.Target, v)
			continue
		}
		rr, pr := r.ratios(b)
		brps := b.RPS()
		if r.Baseline != nil {
			brps = r.Baseline.RPS()
		}
		p("| %s | %s | %d | %.1f s | %d | %.0f | %s | %s | %s | %d | %s | %.0f | %.2f%s | %.2f | %s | %s |\n",
			name, shortCall(r.Call), r.Concurrency, r.Elapsed.Seconds(), r.Requests, r.RPS(),
			fmtDur(r.P50), fmtDur(r.P95), fmtDur(r.P99), r.Errors, fmtMicros(r.ServerCPUPerRequest()), brps, rr, r.ratioRange(), pr, r.Target, v)
	}
	p("\n")

	rep.floorMarkdown(&w)

	p("## Payloads and checks\n\n")
	for i := range rep.Results {
		r := &rep.Results[i]
		p("- **%s**: %s", r.Name, r.Payload)
		for _, n := range r.Notes {
			p("; %s", n)
		}
		p("\n")
	}
	p("\n")

	var failed []*Result
	for i := range rep.Results {
		if r := &rep.Results[i]; r.Failure != "" || len(r.ErrorDist) > 0 {
			failed = append(failed, r)
		}
	}
	if len(failed) > 0 {
		p("## Failures and errors\n\n")
		for _, r := range failed {
			if r.Failure != "" {
				p("- **%s** did not run: `%s`\n", r.Name, oneLine(r.Failure, 400))
			}
			keys := make([]string, 0, len(r.ErrorDist))
			for k := range r.ErrorDist {
				keys = append(keys, k)
			}
			sort.Slice(keys, func(i, j int) bool {
				if r.ErrorDist[keys[i]] != r.ErrorDist[keys[j]] {
					return r.ErrorDist[keys[i]] > r.ErrorDist[keys[j]]
				}
				return keys[i] < keys[j]
			})
			for i, k := range keys {
				if i == 5 {
					p("- **%s**: %d more distinct errors\n", r.Name, len(keys)-5)
					break
				}
				p("- **%s**: %d × `%s`\n", r.Name, r.ErrorDist[k], oneLine(k, 300))
			}
		}
		p("\n")
	}

	p("## Server memory (VmRSS)\n\n")
	p("| process | at start | peak between scenarios | at end |\n|---|--:|--:|--:|\n")
	for _, m := range rep.Memory {
		p("| %s | %s | %s | %s |\n", m.Process, fmtMiB(m.StartKiB), fmtMiB(m.PeakSample), fmtMiB(m.EndKiB))
	}
	p("\n")

	if s := rep.Soak; s != nil && len(s.Samples) > 0 {
		p("## Soak: memory over %s\n\n", s.Duration.Round(time.Second))
		rounds := fmt.Sprint(s.Rounds)
		if s.Partial {
			rounds = fmt.Sprintf("%d rounds and part of a %s, where the soak's time ran out", s.Rounds-1, ordinal(s.Rounds))
		} else {
			rounds += " rounds"
		}
		p("The scenarios above were measured during the soak: %s, each round giving every scenario one slice right after a baseline slice. After each scenario slice: every replica's RSS, and from its /metrics its live heap (compactord_heap_live_bytes: what the last GC marked) and the bytes its bounded in-memory stores (summary cache, token memo) charge. Flat means: every replica's RSS at the end ≤ %.2f × its RSS after the first slice of the same scenario (sample %d), so both samples follow the same load.\n\n",
			rounds, s.MaxGrowth, s.RefIndex+1)
		for _, f := range s.Fill {
			p("Before the first sample, %s ran for %s with %d calls in flight (%d requests, %d errors), every call adding new entries to the stores, so that the soak starts with them at their bounds, where they evict instead of growing; after it, the stores held", f.Scenario, f.Duration.Round(time.Second), f.Concurrency, f.Requests, f.Errors)
			for i, h := range f.Heap {
				if i > 0 {
					p(";")
				}
				p(" %s of %s (%.0f%%) on %s", fmtMiB(h.Stores>>10), fmtMiB(h.StoresMax>>10), 100*float64(h.Stores)/float64(max(h.StoresMax, 1)), replicaName(rep, i))
			}
			p(".\n\n")
		}
		p("| # | elapsed | slice | requests | errors |")
		for i := range s.Samples[0].RSSKiB {
			n := replicaName(rep, i)
			p(" %s RSS | %s live heap | %s stores |", n, n, n)
		}
		p("\n|--:|--:|---|--:|--:|")
		for range s.Samples[0].RSSKiB {
			p("--:|--:|--:|")
		}
		p("\n")
		for i, x := range s.Samples {
			p("| %d | %s | %s | %d | %d |", i+1, x.Elapsed.Round(time.Second), x.Scenario, x.Requests, x.Errors)
			for j, k := range x.RSSKiB {
				live, stores := "—", "—"
				if j < len(x.Heap) {
					live, stores = fmtMiB(x.Heap[j].Live>>10), fmtMiB(x.Heap[j].Stores>>10)
				}
				p(" %s | %s | %s |", fmtMiB(k), live, stores)
			}
			p("\n")
		}
		p("\n")
		flat, detail := s.Flat()
		verdict := "flat"
		if !flat {
			verdict = "**grew**"
		}
		p("Memory: %s (%s).\n\n", verdict, detail)
	}

	if len(rep.Notes) > 0 {
		p("## Notes\n\n")
		for _, n := range rep.Notes {
			p("- %s\n", n)
		}
	}
	return w.String()
}

// floorMarkdown renders the floor section, if the run measured one.
func (rep *Report) floorMarkdown(w *strings.Builder) {
	if len(rep.Floor) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## Floor: the same calls with no engine work\n\n")
	p("Every scenario with a target, measured in the same rounds as above against loadtest/floorserver (each floor slice right after the scenario's own, and right after a health-check slice on the floor server; its ratios are against those): compactord's gRPC stack (service.NewGRPC: the same codec, which decodes every request in full and checks its strings are UTF-8, the JSON log line per call, the metrics and recovery interceptors, the tracing handler, the health service; built with %s, the versions compactord was built with) answering every call with the response compactord gave to the same request, and doing nothing else. ", rep.FloorModules)
	p("Its RPS ratio is the most compactord could reach if its engine (validation and the work itself) cost nothing; engine CPU/call is compactord's server CPU per call minus the floor server's.\n\n")
	p("| scenario | target | compactord RPS ratio | floor RPS ratio | floor p99 ratio | floor baseline RPS | compactord server CPU/call | floor server CPU/call | engine CPU/call | target within the floor |\n")
	p("|---|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for i := range rep.Floor {
		f := &rep.Floor[i]
		var main *Result
		for j := range rep.Results {
			if rep.Results[j].Name == f.Name {
				main = &rep.Results[j]
			}
		}
		mr, mcpu, engine := "—", "—", "—"
		if main != nil && main.Failure == "" {
			r, _ := main.ratios(rep.baseline())
			mr = fmt.Sprintf("%.2f%s", r, main.ratioRange())
			mcpu = fmtMicros(main.ServerCPUPerRequest())
			if main.ServerCPU > 0 && f.ServerCPU > 0 {
				engine = fmtMicros(main.ServerCPUPerRequest() - f.ServerCPUPerRequest())
			}
		}
		fr, fp := f.ratios(nil)
		within := "—"
		if f.Target != nil {
			within = "yes"
			if fr < f.Target.RPSRatio {
				within = "**no**: RPS ratio " + compared(fr, "<", f.Target.RPSRatio) + " with no engine work"
			}
		}
		var brps float64
		if f.Baseline != nil {
			brps = f.Baseline.RPS()
		}
		p("| %s | %s | %s | %.2f%s | %.2f | %.0f | %s | %s | %s | %s |\n",
			f.Name, f.Target, mr, fr, f.ratioRange(), fp, brps, mcpu, fmtMicros(f.ServerCPUPerRequest()), engine, within)
	}
	p("\n")
}

// Flat reports whether every process ended within MaxGrowth of its reference sample.
func (s *Soak) Flat() (bool, string) {
	if len(s.Samples) == 0 || s.RefIndex >= len(s.Samples) {
		return false, "no samples"
	}
	ref, end := s.Samples[s.RefIndex], s.Samples[len(s.Samples)-1]
	ok := true
	var parts []string
	for i := range end.RSSKiB {
		if i >= len(ref.RSSKiB) || ref.RSSKiB[i] == 0 {
			return false, "missing samples"
		}
		g := float64(end.RSSKiB[i]) / float64(ref.RSSKiB[i])
		if g > s.MaxGrowth {
			ok = false
		}
		parts = append(parts, fmt.Sprintf("%.2f×", g))
	}
	return ok, "end / reference per server: " + strings.Join(parts, ", ")
}

func shortCall(call string) string {
	if i := strings.LastIndex(call, "."); i >= 0 && strings.HasPrefix(call, "compactor.") {
		return call[i+1:]
	}
	return call
}

// oneLine squeezes s onto one line of at most n bytes for a Markdown cell or list item.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "`", "'")
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}

// replicaName is the name of the i-th replica: the i-th server process of the memory table
// that is not Redis.
func replicaName(rep *Report, i int) string {
	for _, m := range rep.Memory {
		if strings.HasPrefix(m.Process, "redis") {
			continue
		}
		if i == 0 {
			return m.Process
		}
		i--
	}
	return fmt.Sprintf("replica-%d", i+1)
}

// ordinal is "first", "second", ... for small n, "nth" beyond.
func ordinal(n int) string {
	words := []string{"zeroth", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"}
	if n >= 0 && n < len(words) {
		return words[n]
	}
	return fmt.Sprintf("%dth", n)
}

package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestPercentiles(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		lat  []time.Duration
		want []time.Duration // p50, p95, p99
	}{
		{lat: nil, want: ms(0, 0, 0)},
		{lat: ms(7), want: ms(7, 7, 7)},
		{lat: ms(4, 1, 3, 2), want: ms(2, 4, 4)},
		{lat: ms(10, 9, 8, 7, 6, 5, 4, 3, 2, 1), want: ms(5, 10, 10)},
	}
	for _, tt := range tests {
		got := percentiles(tt.lat, 0.5, 0.95, 0.99)
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("percentiles(%v) = %v, want %v", tt.lat, got, tt.want)
				break
			}
		}
	}
	// Nearest rank over 1..100 ms.
	var hundred []time.Duration
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, time.Duration(i)*time.Millisecond)
	}
	got := percentiles(hundred, 0.5, 0.95, 0.99)
	if got[0] != 50*time.Millisecond || got[1] != 95*time.Millisecond || got[2] != 99*time.Millisecond {
		t.Errorf("percentiles(1..100ms) = %v", got)
	}
}

func TestResultAdd(t *testing.T) {
	r := &Result{}
	r.add(&Result{Elapsed: time.Second, Requests: 100, Errors: 1, ErrorDist: map[string]int{"boom": 1}, ServerCPU: time.Second, lat: []time.Duration{3, 1}})
	r.add(&Result{Elapsed: time.Second, Requests: 300, Errors: 2, ErrorDist: map[string]int{"boom": 2}, lat: []time.Duration{2}})
	r.finish()
	if r.Requests != 400 || r.Errors != 3 || r.ErrorDist["boom"] != 3 || r.RPS() != 200 || r.P50 != 2 || r.P99 != 3 {
		t.Errorf("merged %+v", r)
	}
	if r.ServerCPUPerRequest() != time.Second/400 {
		t.Errorf("server CPU per request %s", r.ServerCPUPerRequest())
	}
}

func TestVerdict(t *testing.T) {
	base := &Result{Elapsed: time.Second, Requests: 1000, P99: 10 * time.Millisecond}
	tgt := &Target{RPSRatio: 0.7, P99Ratio: 3}
	tests := []struct {
		name string
		r    Result
		ok   bool
		text string
	}{
		{"pass", Result{Elapsed: time.Second, Requests: 700, P99: 30 * time.Millisecond, Target: tgt}, true, "pass"},
		{"slow", Result{Elapsed: time.Second, Requests: 699, P99: 5 * time.Millisecond, Target: tgt}, false, "RPS ratio 0.699 < 0.700"},
		{"slower", Result{Elapsed: time.Second, Requests: 690, P99: 5 * time.Millisecond, Target: tgt}, false, "RPS ratio 0.69 < 0.70"},
		{"tail", Result{Elapsed: time.Second, Requests: 900, P99: 31 * time.Millisecond, Target: tgt}, false, "p99 ratio 3.10 > 3.00"},
		{"errors", Result{Elapsed: time.Second, Requests: 900, Errors: 1, Target: tgt}, false, "1 errors"},
		{"failed", Result{Failure: "Unimplemented", Target: tgt}, false, "did not run"},
		{"no target", Result{Elapsed: time.Second, Requests: 10}, true, "—"},
		{"no requests", Result{Elapsed: time.Second}, false, "no requests"},
		{"own baseline", Result{Elapsed: time.Second, Requests: 700, P99: 30 * time.Millisecond, Target: tgt,
			Baseline: &Result{Elapsed: time.Second, Requests: 2000, P99: 10 * time.Millisecond}}, false, "RPS ratio 0.35"},
		{"median of slices", Result{Elapsed: time.Second, Requests: 100, P99: 30 * time.Millisecond, Target: tgt, SliceRatios: []float64{0.1, 0.8, 0.75},
			Baseline: &Result{Elapsed: time.Second, Requests: 2000, P99: 10 * time.Millisecond}}, true, "pass"},
		{"median of even slices", Result{Elapsed: time.Second, Requests: 100, P99: 30 * time.Millisecond, Target: tgt, SliceRatios: []float64{0.1, 0.8, 0.5, 0.9},
			Baseline: &Result{Elapsed: time.Second, Requests: 2000, P99: 10 * time.Millisecond}}, false, "RPS ratio 0.65"},
	}
	for _, tt := range tests {
		ok, text := tt.r.Verdict(base)
		if ok != tt.ok || !strings.Contains(text, tt.text) {
			t.Errorf("%s: Verdict = %v %q, want %v and %q", tt.name, ok, text, tt.ok, tt.text)
		}
	}
}

// A floor slice with errors makes the run not OK, as a scenario's would.
func TestFloorErrorsNotOK(t *testing.T) {
	ok := Result{Name: "health", Elapsed: time.Second, Requests: 10}
	rep := &Report{Results: []Result{ok}, Floor: []Result{ok}}
	if !rep.OK() {
		t.Fatal("a clean report is not OK")
	}
	rep.Floor = append(rep.Floor, Result{Name: "lower", Elapsed: time.Second, Requests: 10, Errors: 1})
	if rep.OK() {
		t.Error("a report whose floor had errors is OK")
	}
}

func TestSoakFlat(t *testing.T) {
	s := &Soak{MaxGrowth: 1.2, RefIndex: 1, Samples: []SoakSample{
		{RSSKiB: []int64{50, 50}}, {RSSKiB: []int64{100, 100}}, {RSSKiB: []int64{110, 120}},
	}}
	if ok, detail := s.Flat(); !ok {
		t.Errorf("Flat = false (%s), want true", detail)
	}
	s.Samples = append(s.Samples, SoakSample{RSSKiB: []int64{110, 121}})
	if ok, detail := s.Flat(); ok || !strings.Contains(detail, "1.21×") {
		t.Errorf("Flat = true (%s), want false", detail)
	}
	if ok, _ := (&Soak{}).Flat(); ok {
		t.Error("Flat without samples = true")
	}
}

// The rendered report is compared with testdata/report.golden.md (-update rewrites it).
func TestMarkdownGolden(t *testing.T) {
	ms := time.Millisecond
	tgt := &Target{RPSRatio: 0.7, P99Ratio: 3}
	base := Result{Name: "health", Call: "grpc.health.v1.Health/Check", Concurrency: 16, Elapsed: 12 * time.Second, Requests: 120000,
		P50: ms, P95: 3 * ms, P99: 5 * ms, ServerCPU: 6 * time.Second, Payload: "0.0 KiB per request",
		Notes: []string{"the baseline row adds up every baseline slice"}}
	rep := &Report{
		Date:     time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC),
		Command:  "cd loadtest && go run . -soak 5m",
		Commit:   "abc1234",
		Env:      "go1.26 linux/amd64, 2 CPUs",
		Topology: "3 replicas sharing redis-server 7.0.15",
		Results: []Result{
			base,
			{Name: "plan-20", Call: "compactor.v1.CompactorService/Plan", Concurrency: 16, Elapsed: 6 * time.Second, Requests: 48000,
				P50: 2 * ms, P95: 5 * ms, P99: 9 * ms, ServerCPU: 4 * time.Second, Target: tgt,
				Baseline: &Result{Elapsed: 6 * time.Second, Requests: 60000, P99: 4 * ms}, SliceRatios: []float64{0.9, 0.75, 0.8},
				Payload: "`a.openai.json`, 20 of 28 messages, 23.7 KiB per request"},
			{Name: "lower-gemini-20", Call: "compactor.v1.CompactorService/Lower", Concurrency: 16, Elapsed: 6 * time.Second, Requests: 100,
				Errors: 3, ErrorDist: map[string]int{"rpc error: code = Internal desc = `boom`": 3}, P50: 2 * ms, P95: 5 * ms, P99: 9 * ms,
				Baseline: &Result{Elapsed: 6 * time.Second, Requests: 60000, P99: 4 * ms}, Target: tgt, Payload: "x"},
			{Name: "compact-hit-20", Call: "compactor.v1.CompactorService/Compact", Concurrency: 16, Target: &Target{RPSRatio: 0.5},
				Failure: "rpc error: code = Unimplemented desc = Compact is not implemented yet", Payload: "y"},
		},
		Memory: []MemRow{
			{Process: "replica-1", StartKiB: 40960, PeakSample: 81920, EndKiB: 61440},
			{Process: "redis", StartKiB: 8192, PeakSample: 9216, EndKiB: 9216},
		},
		Soak: &Soak{Duration: 5 * time.Minute, Rounds: 7, Partial: true, RefIndex: 0, MaxGrowth: 1.2,
			Fill: []SoakFill{{Scenario: "compact-miss-20", Concurrency: 64, Duration: 15 * time.Second, Requests: 8000,
				Heap: []heapState{{Live: 30 << 20, Stores: 5 << 20, StoresMax: 6 << 20}}}},
			Samples: []SoakSample{
				{Elapsed: 15 * time.Second, Scenario: "health", Requests: 150000, RSSKiB: []int64{61440},
					Heap: []heapState{{Live: 31 << 20, Stores: 5 << 20, StoresMax: 6 << 20}}},
				{Elapsed: 30 * time.Second, Scenario: "plan-20", Requests: 60000, RSSKiB: []int64{63488}},
			}},
		Notes: []string{"a note"},
		Floor: []Result{
			{Name: "plan-20", Call: "compactor.v1.CompactorService/Plan", Concurrency: 16, Elapsed: 6 * time.Second, Requests: 54000,
				P99: 8 * ms, ServerCPU: 3 * time.Second, Target: tgt, SliceRatios: []float64{0.95, 0.85, 0.9},
				Baseline: &Result{Elapsed: 6 * time.Second, Requests: 60000, P99: 4 * ms}},
			{Name: "lower-gemini-20", Call: "compactor.v1.CompactorService/Lower", Concurrency: 16, Elapsed: 6 * time.Second, Requests: 33000,
				P99: 9 * ms, ServerCPU: 3 * time.Second, Target: tgt, SliceRatios: []float64{0.5, 0.55, 0.6},
				Baseline: &Result{Elapsed: 6 * time.Second, Requests: 60000, P99: 4 * ms}},
		},
		FloorModules: "go1.26, google.golang.org/grpc v1.85.0",
	}
	got := rep.Markdown()
	if rep.OK() || rep.TargetsMet() {
		t.Error("a report with errors and a failed scenario is OK")
	}
	golden := filepath.Join("testdata", "report.golden.md")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if got != string(want) {
		t.Errorf("Markdown differs from %s (run go test -update and review the diff):\n%s", golden, got)
	}
}

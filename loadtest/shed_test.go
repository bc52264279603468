package main

import (
	"strings"
	"testing"
	"time"

	"github.com/bojand/ghz/runner"
)

func TestShedSummary(t *testing.T) {
	rep := &runner.Report{Total: time.Second}
	for i := range 100 {
		rep.Details = append(rep.Details, runner.ResultDetail{Latency: time.Duration(i+1) * time.Millisecond, Status: "OK"})
	}
	rep.Details = append(rep.Details,
		runner.ResultDetail{Error: "overloaded", Status: "Unavailable"},
		runner.ResultDetail{Error: "overloaded", Status: "Unavailable"},
		runner.ResultDetail{Error: "deadline", Status: "DeadlineExceeded"},
		runner.ResultDetail{Error: "boom", Status: "Internal"})
	r := shedSummary(shedPhase{name: "x"}, rep)
	if r.ok != 100 || r.refused != 2 || r.deadline != 1 || r.other != 1 {
		t.Errorf("counts %+v", r)
	}
	if r.p50 != 51*time.Millisecond || r.p99 != 100*time.Millisecond {
		t.Errorf("p50 %v p99 %v: percentiles must be over the OK calls only", r.p50, r.p99)
	}
	run := &shedRun{bound: 2, capacity: 100, results: []*shedResult{r}, ratio: 3, counted: 2}
	out := shedReport(flags{shedMax: "2", shedConversation: "c.json", shedDuration: time.Second}, []*shedRun{run}, "rev")
	for _, want := range []string{"| 2 | 100 | 3.00 | 1 | 2 | 2 | not held |", "other error ×1: Internal: boom"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

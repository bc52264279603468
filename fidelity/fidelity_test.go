package fidelity_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/summary"
)

func lift(t *testing.T, name string) []*compactorv1.Message {
	t.Helper()
	body, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	l, err := format.Lift(&compactorv1.LiftRequest{Body: string(body)})
	if err != nil {
		t.Fatal(err)
	}
	return l.GetMessages()
}

// missing is how many requests and paths a check neither found retained nor appended.
func missing(c summary.Check) int {
	return c.RequestsTotal - c.RequestsRetained - c.RequestsAppended + c.PathsTotal - c.PathsRetained - c.PathsAppended
}

func text(role compactorv1.Role, s string) *compactorv1.Message {
	return &compactorv1.Message{Role: role, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}}}
}

// TestRequestsAndPathsOnCorpusSnippets: the rules on real conversations. SWE-agent's
// demonstration is not the task and its observations are not requests; tau-bench's user
// turns are all requests (lines of 15+ characters only).
func TestRequestsAndPathsOnCorpusSnippets(t *testing.T) {
	tests := []struct {
		file      string
		requests  int
		taskStart string
		paths     []string
	}{
		{"sweagent-testrepo-i1.head.openai.json", 1, "We're currently solving the following issue", []string{"tests/missing_colon.py"}},
		{"taubench-airline-t08-r2.head.openai.json", 5, "Hi! I would like to know the sum of my gift card balances", nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			msgs := lift(t, tt.file)
			reqs := fidelity.Requests(msgs)
			if len(reqs) != tt.requests {
				for _, r := range reqs {
					t.Logf("request at %d: %.60q", r.Index, r.Text)
				}
				t.Fatalf("%d requests, want %d", len(reqs), tt.requests)
			}
			if !strings.HasPrefix(reqs[0].Text, tt.taskStart) {
				t.Errorf("task = %.80q, want it to start %q", reqs[0].Text, tt.taskStart)
			}
			got := fidelity.Paths(msgs, reqs)
			for _, p := range tt.paths {
				found := false
				for _, g := range got {
					found = found || strings.HasSuffix(g, p)
				}
				if !found {
					t.Errorf("paths %q lack %q", got, p)
				}
			}
		})
	}
}

// TestCheckAppendsWhatASummaryDropped: a one-line summary of a real SWE-agent range gets
// the task and the paths appended, within the budget; Measure then finds everything.
func TestCheckAppendsWhatASummaryDropped(t *testing.T) {
	msgs := lift(t, "sweagent-testrepo-i1.head.openai.json")
	head, rng := msgs[:1], msgs[1:]
	count := func(s string) int { return (len(s) + 3) / 4 }
	out, rep := fidelity.Check(fidelity.CheckInput{Summary: "The agent fixed a bug.", Range: rng, Kept: head, Budget: 1500, Count: count})
	if rep.RequestsTotal != 1 || rep.RequestsAppended != 1 || rep.PathsAppended == 0 || missing(rep) != 0 {
		t.Errorf("report %+v, want the task and every path appended", rep)
	}
	if n := count(out); n > 1500 {
		t.Errorf("checked summary has %d tokens, budget 1500", n)
	}
	f := fidelity.Measure(rng, append(head, text(compactorv1.Role_ROLE_USER, out)))
	if f.Requests != 1 || f.Paths != 1 {
		t.Errorf("after the check: %+v", f)
	}
	// A summary that already holds everything is returned as it was.
	again, rep2 := fidelity.Check(fidelity.CheckInput{Summary: out, Range: rng, Kept: head, Budget: 1500, Count: count})
	if again != out || rep2.RequestsRetained != 1 || rep2.RequestsAppended != 0 || rep2.PathsAppended != 0 {
		t.Errorf("checking a checked summary changed it: %+v", rep2)
	}
}

// TestCheckWithinBudget: with a budget too small for the task, the check appends what fits
// (paths, missing lines) and never exceeds it; the summary is cut to make room.
func TestCheckWithinBudget(t *testing.T) {
	msgs := lift(t, "sweagent-testrepo-i1.head.openai.json")
	count := func(s string) int { return (len(s) + 3) / 4 }
	for _, budget := range []int{40, 100, 300, 800} {
		out, rep := fidelity.Check(fidelity.CheckInput{Summary: strings.Repeat("long summary text ", 400), Range: msgs[1:], Kept: msgs[:1], Budget: budget, Count: count})
		if n := count(out); n > budget {
			t.Errorf("budget %d: checked summary has %d tokens", budget, n)
		}
		if !rep.Trimmed {
			t.Errorf("budget %d: a summary over the budget was not reported trimmed", budget)
		}
	}
}

// FuzzCheck: for any summary, request text and budget, the checked summary is within the
// budget, the report adds up, and what the check says it retained or appended is there.
func FuzzCheck(f *testing.F) {
	f.Add("summary", "please fix src/app/main.go and keep tests/a_test.go green", "ok then", 200)
	f.Add("", "a\n\n   spaced    request   line here\n", "", 10)
	f.Add("x", strings.Repeat("some request line ", 50), "edit lib/x/y.rs", 60)
	f.Fuzz(func(t *testing.T, summary, task, assistant string, budget int) {
		if budget < 0 || budget > 1<<16 {
			return
		}
		rng := []*compactorv1.Message{text(compactorv1.Role_ROLE_USER, task), text(compactorv1.Role_ROLE_ASSISTANT, assistant)}
		count := func(s string) int { return (len(s) + 3) / 4 }
		out, rep := fidelity.Check(fidelity.CheckInput{Summary: summary, Range: rng, Budget: budget, Count: count})
		if budget > 0 && count(out) > budget {
			t.Fatalf("checked summary %d tokens > budget %d", count(out), budget)
		}
		if missing(rep) < 0 || rep.RequestsRetained+rep.RequestsAppended > rep.RequestsTotal || rep.PathsRetained+rep.PathsAppended > rep.PathsTotal {
			t.Fatalf("report does not add up: %+v", rep)
		}
		if missing(rep) == 0 && !rep.Trimmed {
			if m := fidelity.Measure(rng, []*compactorv1.Message{text(compactorv1.Role_ROLE_USER, out)}); m.Requests != 1 || m.Paths != 1 {
				t.Fatalf("check reports nothing missing but the measure finds %+v in %q", m, out)
			}
		}
	})
}

// TestCheckFoldsWholeRequests: the earlier summary's requests count before the range's;
// when not all fit, whole requests are folded (never cut mid-line), the task kept first and
// then the newest, and the folded ones are reported by number.
func TestCheckFoldsWholeRequests(t *testing.T) {
	req := func(n int) string {
		return "Request number " + strings.Repeat(string(rune('a'+n)), 3) + " " + strings.Repeat("please do this one thing well; ", 6)
	}
	earlier := []string{req(0), req(1)}
	rng := []*compactorv1.Message{
		text(compactorv1.Role_ROLE_USER, req(2)), text(compactorv1.Role_ROLE_ASSISTANT, "ok"),
		text(compactorv1.Role_ROLE_USER, req(3)), text(compactorv1.Role_ROLE_ASSISTANT, "ok"),
	}
	count := func(s string) int { return (len(s) + 3) / 4 }
	one := count("Request 4:\n"+req(3)) + 1
	tests := []struct {
		budget  int
		dropped []int
	}{
		{budget: 0, dropped: nil},
		{budget: count(fidelity.CheckedHeading) + 4 + 2*one + 30, dropped: []int{2, 3}},
		{budget: count(fidelity.CheckedHeading) + 4 + 3*one + 30, dropped: []int{2}},
	}
	for _, tc := range tests {
		out, rep := fidelity.Check(fidelity.CheckInput{Summary: "- did things", Range: rng, EarlierRequests: earlier,
			Budget: tc.budget, Count: count})
		if rep.RequestsTotal != 4 {
			t.Errorf("budget %d: %d requests, want 4", tc.budget, rep.RequestsTotal)
		}
		if !slices.Equal(rep.RequestsDropped, tc.dropped) {
			t.Errorf("budget %d: dropped %v, want %v:\n%s", tc.budget, rep.RequestsDropped, tc.dropped, out)
		}
		for i, r := range []string{req(0), req(1), req(2), req(3)} {
			kept := strings.Contains(out, strings.TrimSpace(r))
			if want := !slices.Contains(tc.dropped, i+1); kept != want {
				t.Errorf("budget %d: request %d whole in the summary: %v, want %v:\n%s", tc.budget, i+1, kept, want, out)
			}
		}
		if strings.Contains(out, "cut by the check") {
			t.Errorf("budget %d: the summary was cut:\n%s", tc.budget, out)
		}
	}
}

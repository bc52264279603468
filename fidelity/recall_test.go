package fidelity_test

import (
	"fmt"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/internal/irtest"
)

func TestFacts(t *testing.T) {
	tests := []struct {
		text string
		want string // "text:kind" pairs
	}{
		{"edit src/_pytest/python.py then run reproduce_issue.py", "src/_pytest/python.py:path reproduce_issue.py:file name"},
		{"call django.db.models.Q and self.assertEqual", "django.db.models.Q:dotted self.assertEqual:dotted"},
		{"build_filter, MAX_RETRIES, ValueError and getUser", "build_filter:snake_case MAX_RETRIES:snake_case ValueError:CamelCase getUser:CamelCase"},
		{"flight HAT170 on 2024-05-17 for 380 dollars, id 42", "HAT170:id 2024-05-17:number 380:number"},
		{`cabin "economy" or 'business' but not "a" or "two words here that are far too long to count"`, "economy:quoted business:quoted"},
		{"see https://example.com/a/b.py and e.g. and/or v1.2.3", ""},
		{"/testbed/setup.cfg and ./run.sh and ../x/y", "/testbed/setup.cfg:path ./run.sh:path ../x/y:path"},
		{"repeat foo_bar foo_bar", "foo_bar:snake_case"},
	}
	for _, tt := range tests {
		var got []string
		for _, f := range fidelity.Facts(tt.text) {
			got = append(got, f.Text+":"+f.Kind.String())
		}
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("Facts(%q) = %q, want %q", tt.text, g, tt.want)
		}
	}
}

// TestNeededAndRecall: needed facts are those of the history the agent writes again, and a
// compacted history keeps a fact only as a whole word.
func TestNeededAndRecall(t *testing.T) {
	history := []*compactorv1.Message{
		irtest.User("Change reservation ZFA04Y."),
		irtest.Assistant("", irtest.Call("g1", "get_reservation_details", `{"reservation_id":"ZFA04Y"}`)),
		irtest.Result("g1", "get_reservation_details", irtest.OutText(`{"flight_number":"HAT170","date":"2024-05-17","cabin":"economy"}`)),
	}
	future := []*compactorv1.Message{
		irtest.Assistant("Moving HAT170 to 2024-05-18.", irtest.Call("u1", "update_reservation_flights", `{"reservation_id":"ZFA04Y","flight_number":"HAT170"}`)),
		irtest.User("Also my user id is mia_li_3668."), // the user's words are not what the agent uses
	}
	needed := fidelity.Needed(history, future)
	var names []string
	for _, f := range needed {
		names = append(names, f.Text)
	}
	if got := strings.Join(names, " "); got != "ZFA04Y HAT170" {
		t.Fatalf("needed = %q, want %q", got, "ZFA04Y HAT170")
	}
	compacted := []*compactorv1.Message{irtest.User("Summary: reservation ZFA04Y, flight HAT1701.")}
	if kept := fidelity.Recall(needed, compacted); !kept[0] || kept[1] {
		t.Errorf("recall = %v, want ZFA04Y kept and HAT170 not (HAT1701 is another id)", kept)
	}
}

func TestBareLines(t *testing.T) {
	tests := []struct {
		summary     string
		bare, items int
	}{
		{"## Files\n- lib.rs\n- `build_filter`\n- src/x.py: edited parse_args\n", 2, 3},
		{"- Fix the bug\n  quoted continuation\n- yes\nfree text line\n", 0, 2},
		{"- <pr_description>\n  body\n", 0, 1},
		{"", 0, 0},
	}
	for _, tt := range tests {
		if bare, items := fidelity.BareLines(tt.summary); bare != tt.bare || items != tt.items {
			t.Errorf("BareLines(%q) = %d, %d; want %d, %d", tt.summary, bare, items, tt.bare, tt.items)
		}
	}
}

// TestBaselines: both baselines fit the budget; truncation keeps the head, the task and the
// newest messages; masking replaces the oldest outputs first and keeps every agent message
// while it can.
func TestBaselines(t *testing.T) {
	big := strings.Repeat("x ", 400)
	var msgs []*compactorv1.Message
	msgs = append(msgs, irtest.Msg(compactorv1.Role_ROLE_SYSTEM, irtest.Text("system")), irtest.User("the task"))
	for i := range 6 {
		id := fmt.Sprint("c", i)
		msgs = append(msgs, irtest.Assistant(fmt.Sprint("step ", i), irtest.Call(id, "read", `{}`)), irtest.Result(id, "read", irtest.OutText(big)))
	}
	count := func(m *compactorv1.Message) int64 {
		return int64(len(fidelity.VisibleText([]*compactorv1.Message{m}))/4 + 4)
	}
	total := func(ms []*compactorv1.Message) (n int64) {
		for _, m := range ms {
			n += count(m)
		}
		return n
	}
	budget := total(msgs) / 3
	tr := fidelity.Truncation(msgs, budget, count)
	if total(tr) > budget || tr[0] != msgs[0] || tr[1] != msgs[1] || tr[len(tr)-1] != msgs[len(msgs)-1] {
		t.Errorf("truncation: %d tokens (budget %d), %d messages", total(tr), budget, len(tr))
	}
	mask := fidelity.ObservationMasking(msgs, budget, count)
	if total(mask) > budget || len(mask) != len(msgs) {
		t.Fatalf("masking: %d tokens (budget %d), %d of %d messages", total(mask), budget, len(mask), len(msgs))
	}
	if got := fidelity.VisibleText(mask[3:4]); !strings.Contains(got, fidelity.MaskedOutput) {
		t.Errorf("the oldest output is not masked: %q", got)
	}
	if got := fidelity.VisibleText(mask[len(mask)-1:]); strings.Contains(got, fidelity.MaskedOutput) {
		t.Errorf("the newest output is masked although the budget held it")
	}
}

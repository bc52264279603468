package service_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/recalltool"
	"github.com/compactord/compactord/service"
	"google.golang.org/protobuf/proto"
)

// outputRef finds where a pruned or cut output's marker says its full output is.
var outputRef = regexp.MustCompile(`full output in compactord source ([0-9a-f]{64}) (m\d+), for Expand`)

// TestPrunedAndCutOutputsNameTheirSource: with sources kept, the marker of a pruned tool
// output and the note of a cut one name the source and the message where the full output
// is, and a recall_context citation of it returns the original, byte for byte; the
// conversation still fits what the plan promised. Without sources they say it is gone.
func TestPrunedAndCutOutputsNameTheirSource(t *testing.T) {
	big := strings.Repeat("line of a very long build log with some detail in it\n", 3000)
	msgs := []*compactorv1.Message{
		irtest.Msg(compactorv1.Role_ROLE_SYSTEM, irtest.Text("You are an agent.")),
		irtest.User("Build the project and fix what fails."),
		irtest.Assistant("", irtest.Call("c1", "build", `{}`)),
		irtest.Result("c1", "build", irtest.OutText(strings.Repeat("old output of the first build\n", 400))),
		irtest.Assistant("", irtest.Call("c2", "build", `{"again":true}`)),
		irtest.Result("c2", "build", irtest.OutText(big)),
		irtest.Assistant("", irtest.Call("c3", "ls", `{}`)),
		irtest.Result("c3", "ls", irtest.OutText("a b c")),
		irtest.Assistant("", irtest.Call("c4", "ls", `{"l":1}`)),
		irtest.Result("c4", "ls", irtest.OutText("a b c d")),
	}
	policy := &compactorv1.Policy{ContextWindow: 20000, KeepRecentTurns: 10, Prune: &compactorv1.PrunePolicy{KeepRecent: 3, MinOutputTokens: 100}}
	ctx := context.Background()
	for _, discard := range []bool{false, true} {
		srv := service.New(service.Options{DiscardSources: discard})
		resp, err := srv.Compact(ctx, &compactorv1.CompactRequest{Messages: msgs, Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		plan := resp.GetPlan()
		if plan.GetAction() != compactorv1.Action_ACTION_PRUNE || plan.GetCutTokens() == 0 || plan.GetPrunedTokens() == 0 {
			t.Fatalf("discard %v: %v, pruned %d, cut %d: want an output pruned and one cut (%s)", discard, plan.GetAction(), plan.GetPrunedTokens(), plan.GetCutTokens(), plan.GetReason())
		}
		again, err := srv.Plan(ctx, &compactorv1.PlanRequest{Messages: resp.GetMessages(), Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		if again.GetTokensBefore() > plan.GetTokensAfter() {
			t.Errorf("discard %v: the compacted conversation counts %d, over tokens_after %d", discard, again.GetTokensBefore(), plan.GetTokensAfter())
		}
		for _, i := range []int{3, 5} {
			text := recalltool.Text(resp.GetMessages()[i])
			m := outputRef.FindStringSubmatch(text)
			if discard {
				if m != nil || (i == 5 && !strings.Contains(text, "the full output is gone")) {
					t.Errorf("discard: message %d names a source: %.300q", i, text)
				}
				continue
			}
			if m == nil || m[1] != resp.GetSourceHash() || m[2] != "m"+string(rune('0'+i)) {
				t.Fatalf("message %d does not name source %s m%d as where its full output is: %.300q", i, resp.GetSourceHash(), i, text)
			}
			got, err := recalltool.Answerer{Client: recalltool.ExpanderFunc(srv.Expand)}.Cited(ctx, resp.GetMessages(), m[1]+" "+m[2])
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || !proto.Equal(got[0].Message, msgs[i]) {
				t.Errorf("citing %s m%d: %v, want the original", m[1], i, got)
			}
		}
	}
}

package service_test

import (
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/service"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// liftCorpus lifts a corpus file through the RPC.
func liftCorpus(t testing.TB, client compactorv1.CompactorServiceClient, name string) []*compactorv1.Message {
	t.Helper()
	resp, err := client.Lift(t.Context(), &compactorv1.LiftRequest{Body: string(corpus.Read(t, corpus.Named(t, name)))})
	if err != nil {
		t.Fatalf("Lift %s: %v", name, err)
	}
	return resp.GetMessages()
}

func TestPlanOverGRPC(t *testing.T) {
	client := compactorv1.NewCompactorServiceClient(startBufconn(t, service.New(service.Options{})))
	msgs := liftCorpus(t, client, "minisweagent-gemini3-django__django-11141.openai.json")

	big, err := client.Plan(t.Context(), &compactorv1.PlanRequest{Messages: msgs, Policy: &compactorv1.Policy{ContextWindow: 1_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	if big.GetAction() != compactorv1.Action_ACTION_NONE || len(big.GetDispositions()) != len(msgs) {
		t.Errorf("1M window: action %v, %d dispositions for %d messages", big.GetAction(), len(big.GetDispositions()), len(msgs))
	}
	small, err := client.Plan(t.Context(), &compactorv1.PlanRequest{Messages: msgs, Policy: &compactorv1.Policy{ContextWindow: 8_000}})
	if err != nil {
		t.Fatal(err)
	}
	if small.GetAction() != compactorv1.Action_ACTION_SUMMARIZE || small.GetCutIndex() <= 0 || len(small.GetPrefixHash()) != 64 {
		t.Errorf("8k window: action %v, cut %d, prefix hash %q", small.GetAction(), small.GetCutIndex(), small.GetPrefixHash())
	}
	if small.GetTokensBefore() != big.GetTokensBefore() || small.GetTokensAfter() >= small.GetTokensBefore() {
		t.Errorf("tokens before %d/%d after %d", small.GetTokensBefore(), big.GetTokensBefore(), small.GetTokensAfter())
	}
}

func TestPlanErrorsOverGRPC(t *testing.T) {
	client := compactorv1.NewCompactorServiceClient(startBufconn(t, service.New(service.Options{})))
	msgs := liftCorpus(t, client, "minisweagent-gemini3-django__django-11141.openai.json")

	_, err := client.Plan(t.Context(), &compactorv1.PlanRequest{Messages: msgs, Policy: &compactorv1.Policy{ContextWindow: 8000, TriggerRatio: 1.5}})
	if f := BadRequestField(t, err, codes.InvalidArgument); f != "policy.trigger_ratio" {
		t.Errorf("bad ratio: field %q", f)
	}
	_, err = client.Plan(t.Context(), &compactorv1.PlanRequest{Messages: msgs})
	if f := BadRequestField(t, err, codes.InvalidArgument); !strings.HasPrefix(f, "policy") {
		t.Errorf("no policy: field %q", f)
	}

	// A last user turn of ~10k tokens cannot fit an 8k window, whatever is summarized.
	huge := &compactorv1.Message{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{
		Text: &compactorv1.TextPart{Text: strings.Repeat("lorem ipsum dolor sit amet ", 2500)}}}}}
	_, err = client.Plan(t.Context(), &compactorv1.PlanRequest{Messages: append(msgs, huge), Policy: &compactorv1.Policy{ContextWindow: 8000}})
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "exceed") {
		t.Fatalf("tiny window = %v, want FAILED_PRECONDITION saying by how much the floor exceeds it", err)
	}
	found := false
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetReason() == "CONTEXT_IRREDUCIBLE" {
			found = true
		}
	}
	if !found {
		t.Errorf("no ErrorInfo CONTEXT_IRREDUCIBLE in %v", st.Proto())
	}
}

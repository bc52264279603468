package service_test

import (
	"encoding/json"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/service"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// TestLiftLowerOverGRPC lifts every corpus conversation through the RPC, lowers it to every
// provider and lifts the same-format body again to an equal conversation.
func TestLiftLowerOverGRPC(t *testing.T) {
	client := compactorv1.NewCompactorServiceClient(startBufconn(t, service.New(service.Options{})))
	providers := []compactorv1.Provider{
		compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES,
		compactorv1.Provider_PROVIDER_OPENAI_CHAT,
		compactorv1.Provider_PROVIDER_OPENAI_RESPONSES,
		compactorv1.Provider_PROVIDER_GEMINI,
		compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE,
	}
	for _, f := range corpus.Files(t) {
		t.Run(f.Name, func(t *testing.T) {
			lifted, err := client.Lift(t.Context(), &compactorv1.LiftRequest{Body: string(corpus.Read(t, f))})
			if err != nil {
				t.Fatalf("Lift: %v", err)
			}
			for _, p := range providers {
				low, err := client.Lower(t.Context(), &compactorv1.LowerRequest{Messages: lifted.GetMessages(), Provider: p, KeepHistory: true})
				if err != nil {
					t.Fatalf("Lower %v: %v", p, err)
				}
				if !json.Valid([]byte(low.GetBody())) {
					t.Fatalf("Lower %v: body is not JSON", p)
				}
				if p != lifted.GetProvider() {
					continue
				}
				again, err := client.Lift(t.Context(), &compactorv1.LiftRequest{Body: low.GetBody(), Provider: p})
				if err != nil {
					t.Fatalf("Lift of own Lower: %v", err)
				}
				if len(again.GetMessages()) != len(lifted.GetMessages()) {
					t.Fatalf("round trip: %d messages, want %d", len(again.GetMessages()), len(lifted.GetMessages()))
				}
				for i := range again.GetMessages() {
					if !proto.Equal(again.GetMessages()[i], lifted.GetMessages()[i]) {
						t.Fatalf("round trip: messages[%d] differs:\n got %v\nwant %v", i, again.GetMessages()[i], lifted.GetMessages()[i])
					}
				}
			}
		})
	}
}

func TestLiftRejectsBadBodies(t *testing.T) {
	client := compactorv1.NewCompactorServiceClient(startBufconn(t, service.New(service.Options{})))
	tests := []struct {
		name, body string
		provider   compactorv1.Provider
	}{
		{"not JSON", `{"messages": [`, compactorv1.Provider_PROVIDER_UNSPECIFIED},
		{"not an object", `[1, 2]`, compactorv1.Provider_PROVIDER_UNSPECIFIED},
		{"unknown shape", `{"prompt": "hi"}`, compactorv1.Provider_PROVIDER_UNSPECIFIED},
		{"tool result answering nothing", `{"messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"call_9","content":"x"}]}`, compactorv1.Provider_PROVIDER_OPENAI_CHAT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.Lift(t.Context(), &compactorv1.LiftRequest{Body: tt.body, Provider: tt.provider})
			field := BadRequestField(t, err, codes.InvalidArgument)
			if len(field) < 4 || field[:4] != "body" {
				t.Errorf("field = %q, want a path under body", field)
			}
		})
	}
}

package format

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/corpus"
)

var allProviders = []compactorv1.Provider{
	compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES,
	compactorv1.Provider_PROVIDER_OPENAI_CHAT,
	compactorv1.Provider_PROVIDER_OPENAI_RESPONSES,
	compactorv1.Provider_PROVIDER_GEMINI,
	compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE,
}

func corpusProvider(f corpus.File) compactorv1.Provider {
	if f.Format == "anthropic" {
		return compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES
	}
	return compactorv1.Provider_PROVIDER_OPENAI_CHAT
}

// firstDiff names the first message where two conversations differ.
func firstDiff(a, b []*compactorv1.Message) string {
	for i := range min(len(a), len(b)) {
		if !proto.Equal(a[i], b[i]) {
			return "message " + itoa(i) + ":\n  first:  " + a[i].String() + "\n  second: " + b[i].String()
		}
	}
	return "lengths " + itoa(len(a)) + " vs " + itoa(len(b))
}

// TestCorpusRoundTrip lifts every real conversation (detecting its format), checks the IR is
// valid, lowers it back to its own format with base_body = rest_body, lifts that again and
// requires the same IR; then lowers it to the other four formats, which must succeed, give
// valid JSON and lift back.
func TestCorpusRoundTrip(t *testing.T) {
	for _, f := range corpus.Files(t) {
		t.Run(f.Name, func(t *testing.T) {
			body := string(corpus.Read(t, f))
			want := corpusProvider(f)
			lifted, err := Lift(&compactorv1.LiftRequest{Body: body})
			if err != nil {
				t.Fatalf("lift: %v", err)
			}
			if lifted.GetProvider() != want {
				t.Fatalf("detected %v, want %v", lifted.GetProvider(), want)
			}
			if err := engine.DefaultLimits().Validate(lifted.GetMessages()); err != nil {
				t.Fatalf("lifted IR is invalid: %v", err)
			}
			lowered, err := Lower(&compactorv1.LowerRequest{
				Messages: lifted.GetMessages(), Provider: want, BaseBody: lifted.GetRestBody(),
			})
			if err != nil {
				t.Fatalf("lower: %v", err)
			}
			// The only warning allowed: the corpus bodies are conversations without a model,
			// which Lower names as missing for formats that require one.
			ws := lowered.GetWarnings()
			if n := len(ws); n > 0 && strings.HasPrefix(ws[n-1], `base_body: lacks "model"`) && field(lifted.GetRestBody(), "model") == "" {
				ws = ws[:n-1]
			}
			if len(ws) > 0 {
				t.Errorf("lowering to its own format warned: %q", ws)
			}
			again, err := Lift(&compactorv1.LiftRequest{Body: lowered.GetBody(), Provider: want})
			if err != nil {
				t.Fatalf("lift of lowered body: %v", err)
			}
			if !equalMessages(lifted.GetMessages(), again.GetMessages()) {
				t.Fatalf("round trip changed the IR: %s", firstDiff(lifted.GetMessages(), again.GetMessages()))
			}
			if again.GetRestBody() != lifted.GetRestBody() {
				t.Errorf("rest_body changed: %s vs %s", again.GetRestBody(), lifted.GetRestBody())
			}
			for _, p := range allProviders {
				out, err := Lower(&compactorv1.LowerRequest{Messages: lifted.GetMessages(), Provider: p})
				if err != nil {
					t.Fatalf("lower to %v: %v", p, err)
				}
				if !json.Valid([]byte(out.GetBody())) {
					t.Fatalf("lower to %v: invalid JSON", p)
				}
				back, err := Lift(&compactorv1.LiftRequest{Body: out.GetBody(), Provider: p})
				if err != nil {
					t.Fatalf("lift of %v body: %v", p, err)
				}
				if err := engine.DefaultLimits().Validate(back.GetMessages()); err != nil {
					t.Fatalf("lift of %v body gives an invalid IR: %v", p, err)
				}
			}
		})
	}
}

// TestCorpusLowerIsAFixedPoint: for every format, a lowered body lifted and lowered again
// (base_body = rest_body) gives the same bytes — Lift then Lower reproduces any body Lower
// wrote, exactly.
func TestCorpusLowerIsAFixedPoint(t *testing.T) {
	for _, f := range corpus.Files(t) {
		lifted, err := Lift(&compactorv1.LiftRequest{Body: string(corpus.Read(t, f))})
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		for _, p := range allProviders {
			base := map[compactorv1.Provider]string{
				compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES: `{"model":"m","max_tokens":100,"tools":[]}`,
				compactorv1.Provider_PROVIDER_OPENAI_CHAT:        `{"model":"gpt-5","tools":[]}`,
				compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:   `{"model":"o4-mini","store":false}`,
				compactorv1.Provider_PROVIDER_GEMINI:             `{"generationConfig":{"temperature":0}}`,
				compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:   `{"modelId":"m","toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object"}}}}]},"inferenceConfig":{}}`,
			}[p]
			first, err := Lower(&compactorv1.LowerRequest{Messages: lifted.GetMessages(), Provider: p, BaseBody: base})
			if err != nil {
				t.Fatal(err)
			}
			back, err := Lift(&compactorv1.LiftRequest{Body: first.GetBody()})
			if err != nil {
				t.Fatalf("%s → %s: lift: %v", f.Name, ProviderName(p), err)
			}
			if back.GetProvider() != p {
				t.Errorf("%s → %s: detected as %s", f.Name, ProviderName(p), ProviderName(back.GetProvider()))
			}
			second, err := Lower(&compactorv1.LowerRequest{Messages: back.GetMessages(), Provider: p, BaseBody: back.GetRestBody()})
			if err != nil {
				t.Fatal(err)
			}
			if second.GetBody() != first.GetBody() {
				a, b := first.GetBody(), second.GetBody()
				i := 0
				for i < min(len(a), len(b)) && a[i] == b[i] {
					i++
				}
				t.Errorf("%s → %s: not a fixed point; first difference at byte %d:\n%.200s\n%.200s", f.Name, ProviderName(p), i, a[max(0, i-80):], b[max(0, i-80):])
			}
		}
	}
}

func equalMessages(a, b []*compactorv1.Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

package llmtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
)

// OneLineSummary is all the one-line model ever answers: a summary that drops the task,
// every request and every path. The fidelity and recall measures use it to show what the
// summary check repairs.
const OneLineSummary = "The user asked the assistant to work on their code, and the assistant made progress."

// StartOneLine starts a loopback OpenAI-compatible chat completions server whose model
// answers OneLineSummary to every request; the caller closes it.
func StartOneLine() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-oneline", "object": "chat.completion", "created": 0, "model": "one-line",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": OneLineSummary}}},
			"usage": map[string]any{"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020},
		})
	}))
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// fakeSummary is what the fake LLM answers: short, and shaped like the sections the summary
// prompt asks for.
const fakeSummary = "## User requests\n- Port the tool as asked.\n\n## Key decisions\n- Keep the public API.\n\n" +
	"## Files and identifiers\n- src/main.rs\n\n## Errors and fixes\n- none\n\n## Pending work\n- finish the port\n\n" +
	"## Next step\n- run the tests"

// FakeLLM is an OpenAI-compatible chat-completions server on loopback that answers every
// request with the same short summary after a fixed latency, counting the calls.
type FakeLLM struct {
	// Latency is how long each answer is held back.
	Latency time.Duration

	calls  atomic.Int64
	failed atomic.Int64
	srv    *http.Server
	lis    net.Listener
}

// Start listens on a free loopback port and serves until Close.
func (f *FakeLLM) Start() error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	f.lis = lis
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", f.chat)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f.failed.Add(1)
		http.Error(w, `{"error":{"message":"fake LLM serves only POST /v1/chat/completions","type":"invalid_request_error"}}`, http.StatusNotFound)
	})
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.srv.Serve(lis) }()
	return nil
}

// BaseURL is the OpenAI base URL to configure ("http://127.0.0.1:port/v1").
func (f *FakeLLM) BaseURL() string { return "http://" + f.lis.Addr().String() + "/v1" }

// Calls is the number of chat-completion requests answered so far.
func (f *FakeLLM) Calls() int64 { return f.calls.Load() }

// Failed is the number of requests the fake rejected (wrong path or unreadable body).
func (f *FakeLLM) Failed() int64 { return f.failed.Load() }

// Close stops the server.
func (f *FakeLLM) Close() error { return f.srv.Close() }

func (f *FakeLLM) chat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		f.failed.Add(1)
		http.Error(w, `{"error":{"message":"bad request body","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	t := time.NewTimer(f.Latency)
	select {
	case <-t.C:
	case <-r.Context().Done():
		t.Stop()
		return
	}
	n := f.calls.Add(1)
	id := fmt.Sprintf("chatcmpl-fake-%d", n)
	created := time.Now().Unix()
	inTokens := len(body) / 4
	outTokens := len(fakeSummary) / 4
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{
				"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
			})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		chunk(map[string]any{"role": "assistant", "content": ""}, nil)
		for _, s := range strings.SplitAfter(fakeSummary, "\n\n") {
			chunk(map[string]any{"content": s}, nil)
		}
		chunk(map[string]any{}, "stop")
		b, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "choices": []any{},
			"usage": map[string]any{"prompt_tokens": inTokens, "completion_tokens": outTokens, "total_tokens": inTokens + outTokens},
		})
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": id, "object": "chat.completion", "created": created, "model": req.Model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": fakeSummary},
			"finish_reason": "stop",
		}},
		"usage": map[string]any{"prompt_tokens": inTokens, "completion_tokens": outTokens, "total_tokens": inTokens + outTokens},
	})
}

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
	failed atomic.Int64 // requests rejected (wrong path or unreadable body); its test reads it
	srv    *http.Server
	lis    net.Listener
	// faults, when set, are answered in turn instead of summaries (SetFaults).
	faults atomic.Pointer[[]string]
	fseq   atomic.Int64
}

// Fault modes of the fake LLM, for the chaos scenarios.
const (
	FaultRateLimit = "429"       // 429 with Retry-After: 1
	FaultServer    = "500"       // 500
	FaultTimeout   = "timeout"   // no answer until the client gives up
	FaultSlowBody  = "slow"      // headers at once, then the body a byte per 100 ms
	FaultMalformed = "malformed" // 200 with a body that is not JSON
	FaultEmpty     = "empty"     // 200 with an empty summary
)

// AllFaults are every fault mode.
var AllFaults = []string{FaultRateLimit, FaultServer, FaultTimeout, FaultSlowBody, FaultMalformed, FaultEmpty}

// SetFaults makes the fake answer each request with the next of modes, in turn; none
// restores summaries.
func (f *FakeLLM) SetFaults(modes ...string) {
	if len(modes) == 0 {
		f.faults.Store(nil)
		return
	}
	f.faults.Store(&modes)
}

// fault answers r with the next fault mode; it reports false when none is set.
func (f *FakeLLM) fault(w http.ResponseWriter, r *http.Request) bool {
	modes := f.faults.Load()
	if modes == nil {
		return false
	}
	f.calls.Add(1)
	switch mode := (*modes)[int(f.fseq.Add(1)-1)%len(*modes)]; mode {
	case FaultRateLimit:
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":{"message":"rate limited","type":"rate_limit_error"}}`, http.StatusTooManyRequests)
	case FaultServer:
		http.Error(w, `{"error":{"message":"internal error","type":"server_error"}}`, http.StatusInternalServerError)
	case FaultTimeout:
		<-r.Context().Done()
	case FaultSlowBody:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		for _, c := range []byte(`{"id":"x","object":"chat.completion","choices":[`) {
			if _, err := w.Write([]byte{c}); err != nil {
				return true
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return true
			case <-time.After(100 * time.Millisecond):
			}
		}
	case FaultMalformed:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x","choices":[{"message":{"content":`))
	case FaultEmpty:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": ""}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1}})
	}
	return true
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

// Close stops the server.
func (f *FakeLLM) Close() error { return f.srv.Close() }

func (f *FakeLLM) chat(w http.ResponseWriter, r *http.Request) {
	if f.fault(w, r) {
		return
	}
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

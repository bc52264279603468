// Package llmtest runs a local HTTP server speaking the OpenAI chat completions wire
// protocol, for tests of compactord's LLM summarizers through the official SDK. It counts
// calls, records request bodies and answers as scripted.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Reply answers call n (1-based): a status other than 0 or 200 is sent as an OpenAI error
// response; otherwise text is the completion.
type Reply func(n int64) (status int, text string)

// Server is a fake OpenAI-compatible chat completions server on loopback. Point a
// summarizer at URL + "/v1".
type Server struct {
	*httptest.Server
	calls atomic.Int64

	mu      sync.Mutex
	bodies  []string
	reply   Reply
	delay   time.Duration
	arrived chan struct{}
	release chan struct{}
}

// NewOpenAI starts a server that answers every call with "SUMMARY-<n>: …" until scripted
// otherwise. It is closed when the test ends.
func NewOpenAI(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(s.Close)
	return s
}

// Calls returns how many completion requests arrived.
func (s *Server) Calls() int64 { return s.calls.Load() }

// Script sets how the server answers from now on: reply (nil: the default summary) after
// delay (or until the request is cancelled).
func (s *Server) Script(reply Reply, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reply, s.delay = reply, delay
}

// Hold makes every following request wait until release is called; arrived receives one
// value per request as it arrives.
func (s *Server) Hold() (arrived <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arrived, s.release = make(chan struct{}, 64), make(chan struct{})
	rel := s.release
	var once sync.Once
	return s.arrived, func() { once.Do(func() { close(rel) }) }
}

// Body returns the request body of call n (1-based), or "".
func (s *Server) Body(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < 1 || n > len(s.bodies) {
		return ""
	}
	return s.bodies[n-1]
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	var req struct {
		Model string `json:"model"`
	}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	n := s.calls.Add(1)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(body))
	reply, delay, arrived, release := s.reply, s.delay, s.arrived, s.release
	s.mu.Unlock()
	if arrived != nil {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	status, text := 0, fmt.Sprintf("SUMMARY-%d: the user asked for the tasks quoted above; next step: continue.", n)
	if reply != nil {
		status, text = reply(n)
	}
	w.Header().Set("Content-Type", "application/json")
	if status != 0 && status != http.StatusOK {
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":"scripted %d","type":"server_error","code":null,"param":null}}`, status)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1, "model": req.Model,
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": text}}},
		"usage": map[string]any{"prompt_tokens": len(body) / 4, "completion_tokens": len(text) / 4, "total_tokens": (len(body) + len(text)) / 4},
	})
}

// Package measure holds what the measure commands (cmd/fidelity, cmd/recall, cmd/session)
// share: the corpus they read, the summarizer under test and its server, and the
// conversation a corpus file holds. It serves measures only: the product never imports it.
package measure

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/llmtest"
	"github.com/compactord/compactord/service"
	"github.com/compactord/compactord/summarize"
)

// Conversations returns the conversations of dir, else (dir empty) the project's corpus: the
// fixtures and the real conversations (corpus.All); and a name for a report.
func Conversations(dir string) ([]corpus.File, string, error) {
	if dir == "" {
		files, err := corpus.All()
		return files, "the project's corpus (internal/corpus/testdata)", err
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, "", fmt.Errorf("no corpus at %s: pass -corpus DIR", dir)
	}
	files, err := corpus.List(dir)
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("no conversations (*.openai.json, *.anthropic.json) in %s", dir)
	}
	return files, filepath.Base(dir), err
}

// Lift reads the request body at path and lifts it (its format detected).
func Lift(path string) (*compactorv1.LiftResponse, error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lifted, err := format.Lift(&compactorv1.LiftRequest{Body: string(body)})
	if err != nil {
		return nil, fmt.Errorf("lift: %w", err)
	}
	return lifted, nil
}

// oneLineTimeout bounds a call to the one-line model, a loopback server that answers at once.
const oneLineTimeout = 30 * time.Second

// SummarizerNames lists the summarizers a measure can put under test, for flag help and
// errors.
const SummarizerNames = "extractive, oneline, anthropic, anthropic-agent, openai-chat, openai-chat-agent, openai-responses, openai-responses-agent"

// Summarizer is the summarizer under test: a registry that holds it and the name a
// CompactRequest gives to use it ("" for the server's default, the extractive one).
type Summarizer struct {
	Registry *summarize.Registry
	Name     string
	// Agent is the agent's side of the fake provider ("anthropic", "openai-chat",
	// "openai-responses", each with or without "-agent"); nil for the others.
	Agent *Agent
	close func()
}

// NewSummarizer returns the summarizer called name: "extractive", the built-in one, or
// "oneline", an OpenAI summarizer (official SDK) whose model, a loopback httptest server,
// answers one line whatever it is asked (llmtest.OneLineSummary): the poor summary the
// summary check has to repair; "anthropic", "openai-chat" and "openai-responses", a
// summarizer of that API (official SDK) against a fresh llmtest.Provider, which bills usage
// with a prompt cache by prefix, sending its own prompt; the same names with "-agent", the
// same sending the summary request as the agent's own (agent_cache). Close releases it.
func NewSummarizer(name string) (*Summarizer, error) {
	s := &Summarizer{close: func() {}}
	var cfg *summarize.Config
	switch name {
	case "extractive":
	case "oneline":
		llm := llmtest.StartOneLine()
		s.close = llm.Close
		cfg = &summarize.Config{Summarizers: []summarize.SummarizerConfig{{
			Name: "oneline", Kind: "openai", BaseURL: llm.URL + "/v1", Model: "one-line", Timeout: oneLineTimeout,
		}}}
		s.Name = "oneline"
	default:
		var ok bool
		if cfg, ok = providerSummarizer(s, name); !ok {
			return nil, fmt.Errorf("unknown summarizer %q (%s)", name, SummarizerNames)
		}
	}
	reg, err := summarize.NewRegistry(cfg, "", summarize.Options{})
	if err != nil {
		s.close()
		return nil, fmt.Errorf("summarizer %s: %w", name, err)
	}
	s.Registry = reg
	return s, nil
}

// Close stops what the summarizer started (the one-line model's server).
func (s *Summarizer) Close() { s.close() }

// Server returns a new in-process server that summarizes with s, on an empty in-memory
// summary cache of its own, counting tokens with counter (nil: a counter of its own).
func (s *Summarizer) Server(counter *engine.Counter) *service.Server {
	return service.New(service.Options{Summarizers: s.Registry, Cache: cache.NewMemory(cache.MemoryOptions{}), Counter: counter})
}

// AssistantNear returns the index of the assistant message nearest to share of msgs (the
// later one on a tie) among those that follow a user message: where a conversation is split
// into history and future. It is -1 when no assistant message follows a user message.
func AssistantNear(msgs []*compactorv1.Message, share float64) int {
	target := int(share * float64(len(msgs)))
	best, user := -1, false
	for i, m := range msgs {
		switch m.GetRole() {
		case compactorv1.Role_ROLE_USER:
			user = true
		case compactorv1.Role_ROLE_ASSISTANT:
			if user && (best < 0 || abs(i-target) <= abs(best-target)) {
				best = i
			}
		}
	}
	return best
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Output returns where a report goes: the file at path, created, or standard output when path
// is empty. Closing it closes the file (and never standard output).
func Output(path string) (io.WriteCloser, error) {
	if path == "" {
		return nopCloser{os.Stdout}, nil
	}
	return os.Create(path)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Shares parses a comma-separated list of shares in (0, 1], the windows of a measure as
// shares of each conversation's tokens; flag names the flag in the error.
func Shares(flag, list string) ([]float64, error) {
	var out []float64
	for _, w := range strings.Split(list, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(w), 64)
		if err != nil || !(f > 0 && f <= 1) {
			return nil, fmt.Errorf("-%s %q: want shares in (0, 1]", flag, w)
		}
		out = append(out, f)
	}
	return out, nil
}

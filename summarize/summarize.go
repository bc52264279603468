// Package summarize writes the summaries Compact puts in place of old messages. A Summarizer
// is either extractive (the default: deterministic, no network) or an LLM reached through its
// official SDK: any OpenAI-compatible chat completions server (OpenAI, Ollama, vLLM,
// OpenRouter, LiteLLM), the OpenAI Responses API, or Anthropic Messages. LLM summarizers retry 429s and 5xxs with
// exponential backoff and jitter (honouring Retry-After), never wait past the caller's
// deadline, and stop calling a failing provider for a while with a circuit breaker. Every
// call emits one OpenTelemetry span following the GenAI semantic conventions; conversation
// text never goes into spans or logs.
package summarize

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/summary"
	"go.opentelemetry.io/otel/attribute"
)

// Sentinel errors. The service maps them to gRPC codes.
var (
	// ErrUnavailable wraps every provider failure that is not the caller's deadline: network
	// errors, HTTP errors after the retries ran out, an open circuit breaker (UNAVAILABLE).
	ErrUnavailable = errors.New("summarizer unavailable")
	// ErrCircuitOpen is returned, without calling the provider, while the breaker is open.
	// It wraps ErrUnavailable.
	ErrCircuitOpen = fmt.Errorf("%w: circuit breaker open", ErrUnavailable)
	// ErrRejected means the provider refused the request for good (HTTP 400, 401, 403,
	// 404, 422: a bad key, an unknown model, a request it cannot take): a retry meets the
	// same answer, so it does not wrap ErrUnavailable and invites none.
	ErrRejected = errors.New("summarizer rejected the request")
	// ErrEmptySummary means the summarizer produced nothing (an empty or whitespace-only
	// completion). It is not retried: an empty summary is an error, not a compaction.
	ErrEmptySummary = errors.New("summarizer returned an empty summary")
	// ErrUnknown means no summarizer has the requested name; the error also wraps
	// engine.ErrInvalid (a *engine.ValidationError on field "summarizer").
	ErrUnknown = errors.New("unknown summarizer")
)

// DefaultRetryDelay is RetryDelay's answer for a transient failure that names no delay.
const DefaultRetryDelay = time.Second

// retryLater is a transient failure that knows when a retry may succeed: the time left in
// an open breaker's cooldown, or the provider's Retry-After.
type retryLater struct {
	err   error
	delay time.Duration
}

func (e *retryLater) Error() string             { return e.err.Error() }
func (e *retryLater) Unwrap() error             { return e.err }
func (e *retryLater) RetryDelay() time.Duration { return e.delay }

// RetryDelay is how long a caller should wait before retrying after err: the delay the
// failure names (breaker cooldown, Retry-After), else DefaultRetryDelay.
func RetryDelay(err error) time.Duration {
	var r *retryLater
	if errors.As(err, &r) && r.delay > 0 {
		return r.delay
	}
	return DefaultRetryDelay
}

// Errors from the caller's context are returned wrapping ctx.Err(), so
// errors.Is(err, context.DeadlineExceeded) detects a deadline that ran out (including "the
// next retry would start after the deadline").

// Summarizer writes one summary. Implementations are safe for concurrent use.
type Summarizer interface {
	// Summarize summarizes req.Messages, folding in req.Anchor. It returns a non-empty
	// summary, or an error wrapping ErrEmptySummary, ErrUnavailable (ErrCircuitOpen) or the
	// context's error.
	Summarize(ctx context.Context, req Request) (Result, error)
	// Fingerprint identifies what the summary depends on besides the request: it is part of
	// the cache key.
	Fingerprint() Fingerprint
}

// Request is one summarization.
type Request struct {
	// SummaryInput is what the summary covers: the messages to summarize, oldest first (the
	// active messages before the cut, without the previous summary), those of them kept
	// verbatim beside it, the previous summary (the anchor) and the caller's instructions.
	engine.SummaryInput
	// MaxOutputTokens bounds the summary; 0 uses the summarizer's configured maximum.
	MaxOutputTokens int64
	// Count measures text in tokens (e.g. with the request's tokenizer): the extractive
	// summarizer's budget, an LLM summarizer's input bound (max_input_tokens); nil uses
	// ApproxTokens for the first, 3 bytes a token for the second.
	Count func(string) int
	// Agent, when set, is the conversation as the agent sends it, up to the cut: an LLM
	// summarizer of the agent's provider and model sends it as the agent's own request, the
	// summary instruction after it, to read it from the provider's prompt cache (see
	// AgentPrompt); others, and the extractive summarizer, ignore it.
	Agent *AgentPrompt
	// Attributes are added to the summarization span (e.g. the prefix hash and token totals
	// of the compaction). They must never carry conversation text.
	Attributes []attribute.KeyValue
}

// Result is a summary, what it cost, and how the call that wrote it went.
type Result struct {
	// Output is the summary (Text, trimmed, never empty on success; Model, as the provider
	// reported it, ExtractiveModel for the extractive summarizer) and its usage.
	summary.Output
	// FinishReasons are the provider's stop reasons ("stop", "length", "end_turn", …).
	FinishReasons []string
	// Attempts is how many provider calls were made (1 without retries; 0 for extractive).
	Attempts int
}

// CallsModel reports whether s writes its summaries with a model (an LLM summarizer, whose
// calls spend tokens and take a slot among the calls to models) rather than locally (the
// extractive summarizer), whatever its configured name or model.
func CallsModel(s Summarizer) bool {
	_, local := s.(*Extractive)
	return !local
}

// Fingerprint names a summarizer configuration for cache keys: summaries written by a
// different summarizer name, model or prompt version are never reused.
type Fingerprint struct {
	Name          string
	Model         string
	PromptVersion string
}

// String returns the fingerprint as one unambiguous string (each field quoted).
func (f Fingerprint) String() string {
	return strconv.Quote(f.Name) + "," + strconv.Quote(f.Model) + "," + strconv.Quote(f.PromptVersion)
}

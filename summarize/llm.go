package summarize

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/clip"
)

const instrumentationName = "github.com/compactord/compactord/summarize"

// Span attributes: the OpenTelemetry GenAI semantic conventions plus compactor.*.
const (
	AttrOperationName      = attribute.Key("gen_ai.operation.name")
	AttrProviderName       = attribute.Key("gen_ai.provider.name")
	AttrRequestModel       = attribute.Key("gen_ai.request.model")
	AttrRequestMaxTokens   = attribute.Key("gen_ai.request.max_tokens")
	AttrResponseModel      = attribute.Key("gen_ai.response.model")
	AttrUsageInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	AttrUsageOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	AttrUsageCacheRead     = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	AttrUsageCacheCreation = attribute.Key("gen_ai.usage.cache_creation.input_tokens")
	AttrCost               = attribute.Key("compactor.summarize.cost")
	AttrAgentPrefix        = attribute.Key("compactor.summarize.agent_prefix")
	AttrFinishReasons      = attribute.Key("gen_ai.response.finish_reasons")
	AttrErrorType          = attribute.Key("error.type")
	AttrServerAddress      = attribute.Key("server.address")
	AttrMessagesSummarized = attribute.Key("compactor.messages.summarized")
	AttrSummarizer         = attribute.Key("compactor.summarizer")
	AttrPromptVersion      = attribute.Key("compactor.prompt_version")
	AttrAttempts           = attribute.Key("compactor.summarize.attempts")
	AttrAnchored           = attribute.Key("compactor.summarize.anchored")
)

// Provider names for gen_ai.provider.name.
const (
	ProviderOpenAI     = "openai"
	ProviderAnthropic  = "anthropic"
	ProviderExtractive = "compactord.extractive"
)

// RetryPolicy bounds the retries of an LLM summarizer. Zero values take the defaults.
type RetryPolicy struct {
	// MaxAttempts is the number of provider calls per Summarize, first one included.
	// Default 3.
	MaxAttempts int
	// BaseDelay is the backoff before the second attempt; it doubles per attempt up to
	// MaxDelay, and each wait is drawn in [d/2, d] (jitter). Defaults 500ms and 8s.
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// MaxRetryAfter caps a provider's Retry-After; a longer one is not waited for (the
	// call fails). Default 60s.
	MaxRetryAfter time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 3
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 500 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 8 * time.Second
	}
	if p.MaxDelay < p.BaseDelay {
		p.MaxDelay = p.BaseDelay
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = time.Minute
	}
	return p
}

// backoff returns the wait after the given failed attempt (1-based).
func (p RetryPolicy) backoff(attempt int) time.Duration {
	d := p.BaseDelay
	for i := 1; i < attempt && d < p.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, p.MaxDelay)
	return d/2 + rand.N(d/2+1)
}

// completion is what one provider call returned.
type completion struct {
	text          string
	model         string
	inputTokens   int64 // every input token, cache reads and writes included
	cacheRead     int64
	cacheWrite    int64
	outputTokens  int64
	finishReasons []string
}

// callFunc makes one provider call (the SDKs' own retries are off).
type callFunc func(ctx context.Context, system, user string, maxTokens int64) (completion, error)

// apiErrorFunc recognizes a provider API error: its HTTP status, headers and error type.
type apiErrorFunc func(err error) (e *ProviderError, header http.Header, ok bool)

// ProviderError is an HTTP error answer of a provider API. Its message holds only the status
// and the provider's error type, never the response body (which may echo conversation
// text); Unwrap returns the SDK's error for callers that need the details.
type ProviderError struct {
	// Status is the HTTP status code.
	Status int
	// Type is the provider's error type or code ("rate_limit_error", "server_error"), or "".
	Type string
	err  error
}

// Error returns "HTTP <status> <type>"; a type that is not a short identifier is left out.
func (e *ProviderError) Error() string {
	if !errorTypeName.MatchString(e.Type) {
		return "HTTP " + strconv.Itoa(e.Status)
	}
	return "HTTP " + strconv.Itoa(e.Status) + " " + e.Type
}

// errorTypeName is what a provider's error type or code looks like ("rate_limit_error",
// "invalid_api_key"); anything else is not repeated to callers.
var errorTypeName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// netError is a provider call that got no HTTP answer: its message says what kind of
// failure it was, never the SDK's error text, which names the base URL (possibly an
// internal host). The full text goes to the server log (Options.Logger).
type netError struct {
	kind string
	err  error
}

func (e *netError) Error() string { return e.kind }
func (e *netError) Unwrap() error { return e.err }

// describe is the kind of failure of a provider call that got no HTTP answer.
func describe(err error) string {
	var dns *net.DNSError
	var cert *tls.CertificateVerificationError
	var op *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer in time"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed by the provider"
	case errors.As(err, &dns):
		return "provider host name not resolved"
	case errors.As(err, &cert):
		return "provider certificate not trusted"
	case errors.As(err, &op):
		return "network error (" + op.Op + ")"
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return "network error"
	}
	return "malformed answer"
}

// Unwrap returns the SDK error.
func (e *ProviderError) Unwrap() error { return e.err }

// LLM is a Summarizer backed by a chat model API (OpenAI-compatible or Anthropic).
type LLM struct {
	name      string
	provider  string
	model     string
	server    string
	maxTokens int64
	maxInput  int // prompt tokens (Request.Count)
	timeout   time.Duration
	retry     RetryPolicy
	breaker   *breaker
	tracer    trace.Tracer
	call      callFunc
	apiError  apiErrorFunc
	sleep     func(ctx context.Context, d time.Duration) error
	logger    *slog.Logger
	prices    Prices
	// rawCall sends a request body as it is (a summary request as the agent's own, in
	// agentFormat); agentCache says whether to (SummarizerConfig.AgentCache).
	rawCall     func(ctx context.Context, body []byte) (completion, error)
	agentFormat compactorv1.Provider
	agentCache  bool
	official    bool // api.openai.com: max_completion_tokens
}

var _ Summarizer = (*LLM)(nil)

// Fingerprint implements Summarizer.
func (l *LLM) Fingerprint() Fingerprint {
	return Fingerprint{Name: l.name, Model: l.model, PromptVersion: engine.PromptVersion}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Summarize implements Summarizer: it sends engine.SummarySystemPrompt and
// engine.SummaryPrompt to the model, retrying per the RetryPolicy behind the breaker.
func (l *LLM) Summarize(ctx context.Context, req Request) (res Result, err error) {
	maxTokens := req.MaxOutputTokens
	if maxTokens <= 0 {
		maxTokens = l.maxTokens
	}
	ctx, span := startSpan(ctx, l.tracer, l.name, l.provider, l.model, maxTokens, req)
	if l.server != "" {
		span.SetAttributes(AttrServerAddress.String(l.server))
	}
	defer func() { endSpan(span, res, err) }()

	system := engine.SummarySystemPrompt()
	user := l.prompt(req, system)
	call := func(ctx context.Context) (completion, error) { return l.call(ctx, system, user, maxTokens) }
	agent := false
	if body, ok := l.agentBody(req, maxTokens); ok {
		agent = true
		call = func(ctx context.Context) (completion, error) { return l.rawCall(ctx, body) }
	}
	span.SetAttributes(AttrAgentPrefix.Bool(agent))
	var lastErr error
	for attempt := 1; ; attempt++ {
		res.Attempts = attempt - 1
		if err := ctx.Err(); err != nil {
			return res, l.ctxError(err, lastErr)
		}
		done, ok := l.breaker.allow()
		if !ok {
			err := fmt.Errorf("summarizer %s: %w", l.name, ErrCircuitOpen)
			if lastErr != nil {
				err = fmt.Errorf("summarizer %s: %w (last error: %v)", l.name, ErrCircuitOpen, lastErr)
			}
			return res, &retryLater{err, l.breaker.cooldownLeft()}
		}
		res.Attempts = attempt
		actx, cancel := context.WithTimeout(ctx, l.timeout)
		c, err := call(actx)
		cancel()
		if err == nil {
			done(nil)
			res.Model, res.InputTokens, res.OutputTokens, res.FinishReasons = c.model, c.inputTokens, c.outputTokens, c.finishReasons
			res.CacheReadTokens, res.CacheWriteTokens = c.cacheRead, c.cacheWrite
			res.PromptVersion = engine.PromptVersion
			if res.Model == "" {
				res.Model = l.model
			}
			if p, ok := l.prices.Lookup(res.Model, l.model); ok {
				res.Cost = p.Cost(res.Output)
			}
			res.Text = strings.TrimSpace(c.text)
			if res.Text == "" {
				return res, fmt.Errorf("summarizer %s: %w (finish reasons %v)", l.name, ErrEmptySummary, c.finishReasons)
			}
			return res, nil
		}
		pe, header, isAPI := l.apiError(err)
		if isAPI {
			err = pe
			l.logger.WarnContext(ctx, "summarizer call failed", "summarizer", l.name, "attempt", attempt,
				"status", pe.Status, "type", clip.String(pe.Type, clip.Max))
		} else {
			l.logger.WarnContext(ctx, "summarizer call failed", "summarizer", l.name, "attempt", attempt,
				"err", clip.String(err.Error(), 2*clip.Max))
			err = &netError{kind: describe(err), err: err}
		}
		if cerr := ctx.Err(); cerr != nil {
			done(errNoVerdict)
			return res, l.ctxError(cerr, err)
		}
		lastErr = err
		status := 0
		if isAPI {
			status = pe.Status
		}
		retryable, down := classify(status, isAPI)
		switch {
		case down:
			done(errProviderDown)
		case retryable: // rate limited: alive, but no verdict on its health
			done(errNoVerdict)
		default: // it answered; the request was at fault
			done(nil)
		}
		if !retryable || attempt >= l.retry.MaxAttempts {
			return res, l.unavailable(isAPI, retryable, err, attempt)
		}
		wait := l.retry.backoff(attempt)
		if ra, ok := retryAfter(header); ok {
			if ra > l.retry.MaxRetryAfter {
				return res, l.unavailable(isAPI, retryable, err, attempt)
			}
			wait = ra
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return res, fmt.Errorf("summarizer %s: next attempt in %v would start after the deadline: %w (last error: %v)",
				l.name, wait.Round(time.Millisecond), context.DeadlineExceeded, err)
		}
		if err := l.sleep(ctx, wait); err != nil {
			return res, l.ctxError(err, lastErr)
		}
	}
}

func (l *LLM) ctxError(ctxErr, last error) error {
	if last != nil {
		return fmt.Errorf("summarizer %s: %w (last error: %v)", l.name, ctxErr, last)
	}
	return fmt.Errorf("summarizer %s: %w", l.name, ctxErr)
}

// unavailable is the error of a call given up after attempts attempts, err the last one's:
// for a provider's answer (isAPI), ErrRejected when it was not retryable (the request was at
// fault, as classify says), else ErrUnavailable; for anything else (network, our attempt
// timeout), ErrUnavailable. retryable is classify's verdict on err, only read when isAPI.
func (l *LLM) unavailable(isAPI, retryable bool, err error, attempts int) error {
	if isAPI {
		if !retryable {
			return fmt.Errorf("summarizer %s: the provider refused the request: %w: %w", l.name, ErrRejected, err)
		}
		return fmt.Errorf("summarizer %s: %d attempt(s): %w: %w", l.name, attempts, ErrUnavailable, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		// Our per-attempt timeout fired, not the caller's deadline: the provider is too slow,
		// which is UNAVAILABLE; keep the cause out of the chain so it does not read as the
		// caller's DeadlineExceeded.
		return fmt.Errorf("summarizer %s: no answer within %v, %d attempt(s): %w", l.name, l.timeout, attempts, ErrUnavailable)
	}
	return fmt.Errorf("summarizer %s: after %d attempt(s): %w: %w", l.name, attempts, ErrUnavailable, err)
}

// classify says whether a failed call is worth retrying and whether it suggests the
// provider is down (for the breaker). Rate limits are retried but do not trip the breaker;
// other 4xx are the request's fault and are not retried.
func classify(status int, isAPI bool) (retryable, down bool) {
	if !isAPI {
		return true, true // network error, attempt timeout, malformed response
	}
	switch {
	case status == http.StatusTooManyRequests:
		return true, false
	case status == http.StatusRequestTimeout || status == http.StatusConflict:
		return true, true
	case status >= 500:
		return true, true
	}
	return false, false
}

// retryAfter reads retry-after-ms (OpenAI, Anthropic) or Retry-After (seconds or an HTTP
// date).
func retryAfter(h http.Header) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

func tracerFrom(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(instrumentationName)
}

func startSpan(ctx context.Context, tr trace.Tracer, name, provider, model string, maxTokens int64, req Request) (context.Context, trace.Span) {
	return tr.Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		AttrOperationName.String("chat"),
		AttrProviderName.String(provider),
		AttrRequestModel.String(model),
		AttrRequestMaxTokens.Int64(maxTokens),
		AttrMessagesSummarized.Int(len(req.Messages)),
		AttrSummarizer.String(name),
		AttrPromptVersion.String(engine.PromptVersion),
		AttrAnchored.Bool(strings.TrimSpace(req.Anchor) != ""),
	), trace.WithAttributes(req.Attributes...))
}

func endSpan(span trace.Span, res Result, err error) {
	if res.Attempts > 0 {
		span.SetAttributes(AttrAttempts.Int(res.Attempts))
	}
	if res.Model != "" {
		span.SetAttributes(AttrResponseModel.String(res.Model))
	}
	span.SetAttributes(usageAttributes(res.Output)...)
	if len(res.FinishReasons) > 0 {
		span.SetAttributes(AttrFinishReasons.StringSlice(res.FinishReasons))
	}
	if err != nil {
		span.SetAttributes(AttrErrorType.String(errorType(err)))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func errorType(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, ErrCircuitOpen):
		return "circuit_open"
	case errors.Is(err, ErrEmptySummary):
		return "empty_summary"
	case errors.Is(err, ErrRejected):
		return "rejected"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	}
	return "_OTHER"
}

package summarize

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/summary"
)

// ExtractiveModel is the model name the extractive summarizer reports.
const ExtractiveModel = "extractive"

// Extractive is the default Summarizer: ExtractiveSummary (extract.go), deterministic and without
// network. It never returns ErrUnavailable.
type Extractive struct {
	name      string
	maxTokens int64
	tracer    trace.Tracer
}

var _ Summarizer = (*Extractive)(nil)

// NewExtractive returns the extractive summarizer named name with a default budget of
// maxTokens (0: 2048). Only opt.TracerProvider is used.
func NewExtractive(name string, maxTokens int64, opt Options) *Extractive {
	if name == "" {
		name = DefaultName
	}
	if maxTokens <= 0 {
		maxTokens = DefaultMaxOutputTokens
	}
	return &Extractive{name: name, maxTokens: maxTokens, tracer: tracerFrom(opt.TracerProvider)}
}

// Fingerprint implements Summarizer.
func (e *Extractive) Fingerprint() Fingerprint {
	return Fingerprint{Name: e.name, Model: ExtractiveModel, PromptVersion: engine.PromptVersion}
}

// Summarize implements Summarizer. InputTokens is an estimate (serialized size / 4);
// OutputTokens is measured with req.Count. A request with nothing to summarize returns
// ErrEmptySummary.
func (e *Extractive) Summarize(ctx context.Context, req Request) (res Result, err error) {
	maxTokens := req.MaxOutputTokens
	if maxTokens <= 0 {
		maxTokens = e.maxTokens
	}
	_, span := startSpan(ctx, e.tracer, e.name, ProviderExtractive, ExtractiveModel, maxTokens, req)
	defer func() { endSpan(span, res, err) }()
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("summarizer %s: %w", e.name, err)
	}
	count := req.Count
	if count == nil {
		count = ApproxTokens
	}
	text := strings.TrimSpace(ExtractiveSummary(
		req.SummaryInput,
		ExtractiveOptions{MaxTokens: maxTokens, Count: count}))
	res = Result{Output: summary.Output{Model: ExtractiveModel, PromptVersion: engine.PromptVersion}, FinishReasons: []string{"stop"}}
	for _, m := range req.Messages {
		res.InputTokens += int64(proto.Size(m)+3) / 4
	}
	if text == "" {
		return res, fmt.Errorf("summarizer %s: %w", e.name, ErrEmptySummary)
	}
	res.Text = text
	res.OutputTokens = int64(count(text))
	return res, nil
}

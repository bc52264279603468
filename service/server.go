// Package service implements compactor.v1.CompactorService over gRPC: it validates requests,
// runs the engine, the cache and the summarizers, and maps their errors to gRPC status codes.
package service

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/metrics"
	"github.com/compactord/compactord/summarize"
)

// Options configures a Server. The zero value serves with engine.DefaultLimits.
type Options struct {
	// Limits bounds the conversations the server accepts; zero means engine.DefaultLimits.
	Limits engine.Limits
	// Counter counts tokens for every request; nil means a new engine.Counter with the
	// default memo size. Share one per process.
	Counter *engine.Counter
	// Summarizers are the named summarizers; nil means only the built-in extractive one.
	Summarizers *summarize.Registry
	// Cache stores summaries; nil means an in-memory cache with default bounds.
	Cache cache.Cache
	// Fill tunes the cross-replica lock around summarizer calls.
	Fill cache.FillOptions
	// MaxSummaryRatio bounds a summary to this share of the tokens it replaces: summarizers
	// are asked for that budget and the summary check cuts to it; a range too short for any
	// summary answers compacted=false. Zero means 0.5.
	MaxSummaryRatio float64
	// Metrics records cache, summarizer and token metrics; nil records nothing.
	Metrics *metrics.Recorder
	// Admit admits every summarizer call to a model (not the extractive summarizer's); nil
	// admits all.
	Admit SummaryAdmitter
	// Logger receives what goes wrong away from any call (a panic in a summarization its
	// caller left, a failed preparation); nil discards it.
	Logger *slog.Logger
	// Sources keeps every compaction's source (the conversation it received) for Expand; nil
	// means an in-memory store with cache.DefaultSourceTTL and cache.DefaultSourceBudget,
	// unless DiscardSources.
	Sources cache.Sources
	// DiscardSources keeps no sources: Compact names none and Expand finds none.
	DiscardSources bool
	// MaxMessageBytes bounds an Expand page (the responses the server sends); zero means
	// DefaultMaxMessageBytes.
	MaxMessageBytes int
	// PrepareTimeout bounds one preparation of a summary (CompactRequest.prepare,
	// Policy.prepare_ratio), which runs detached from its call; zero means
	// DefaultPrepareTimeout.
	PrepareTimeout time.Duration
	// MaxPreparations bounds the preparations in flight in the server (and
	// MaxTenantPreparations those of one tenant); zero means DefaultMaxPreparations.
	MaxPreparations int
}

// SummaryAdmitter admits summarizer calls to a model and is told what each spent: the
// server-wide bound on LLM calls in flight and the tenant's token budget (package limit),
// against which estimate (what the call may spend) counts until done reports what it did.
// A refusal is a status error (UNAVAILABLE or RESOURCE_EXHAUSTED, with RetryInfo) that
// Compact returns as it is.
type SummaryAdmitter interface {
	AdmitSummary(ctx context.Context, tenant string, estimate int64) (done func(tokens int64), err error)
}

// Server implements compactorv1.CompactorServiceServer. It holds no per-request state and is
// safe for concurrent use.
type Server struct {
	compactorv1.UnimplementedCompactorServiceServer
	limits          engine.Limits
	counter         *engine.Counter
	summarizers     *summarize.Registry
	cache           cache.Cache
	fill            cache.FillOptions
	maxSummaryRatio float64
	metrics         *metrics.Recorder
	admit           SummaryAdmitter
	logger          *slog.Logger
	flights         flights
	sources         cache.Sources // nil: none kept
	keptRecently    keptMemo
	maxMessageBytes int
	preps           preparations
	prepareTimeout  time.Duration
	maxPreparations int
}

// New returns a Server configured by o.
func New(o Options) *Server {
	s := &Server{limits: o.Limits, counter: o.Counter, summarizers: o.Summarizers, cache: o.Cache,
		fill: o.Fill, maxSummaryRatio: o.MaxSummaryRatio, metrics: o.Metrics, admit: o.Admit, logger: o.Logger,
		sources: o.Sources, maxMessageBytes: o.MaxMessageBytes,
		prepareTimeout: o.PrepareTimeout, maxPreparations: o.MaxPreparations}
	switch {
	case o.DiscardSources:
		s.sources = nil
	case s.sources == nil:
		s.sources = cache.NewMemorySources(cache.MemorySourcesOptions{})
	}
	if s.maxMessageBytes <= 0 {
		s.maxMessageBytes = DefaultMaxMessageBytes
	}
	s.preps.stop, s.preps.cancel = context.WithCancel(context.Background())
	if s.prepareTimeout <= 0 {
		s.prepareTimeout = DefaultPrepareTimeout
	}
	if s.maxPreparations <= 0 {
		s.maxPreparations = DefaultMaxPreparations
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.counter == nil {
		s.counter = engine.NewCounter(0)
	}
	if s.summarizers == nil {
		// The registry of the built-in extractive summarizer cannot fail to build.
		s.summarizers, _ = summarize.NewRegistry(nil, "", summarize.Options{})
	}
	if s.cache == nil {
		s.cache = cache.NewMemory(cache.MemoryOptions{})
	}
	if s.maxSummaryRatio <= 0 {
		s.maxSummaryRatio = 0.5
	}
	if s.limits == (engine.Limits{}) {
		s.limits = engine.DefaultLimits()
	}
	return s
}

// validate checks a request's conversation before any work is done.
func (s *Server) validate(msgs []*compactorv1.Message) error {
	return s.limits.Validate(msgs)
}

// Plan implements CompactorService.Plan. With Policy.prepare_ratio, a conversation between
// that ratio and the trigger has its summary prepared, detached (prepare.go).
func (s *Server) Plan(ctx context.Context, req *compactorv1.PlanRequest) (*compactorv1.PlanResponse, error) {
	if err := s.validate(req.GetMessages()); err != nil {
		return nil, toStatus(err)
	}
	resp, err := engine.Plan(req.GetMessages(), req.GetPolicy(), s.counter)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.planAhead(ctx, req, resp); err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

// Lower implements CompactorService.Lower.
func (s *Server) Lower(ctx context.Context, req *compactorv1.LowerRequest) (*compactorv1.LowerResponse, error) {
	if err := s.validate(req.GetMessages()); err != nil {
		return nil, toStatus(err)
	}
	resp, err := format.Lower(req)
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

// Lift implements CompactorService.Lift.
// A body that reads as a conversation breaking a rule of the IR (a tool result answering no
// call, say) is INVALID_ARGUMENT with each violation reported at the body element it was read
// from ("body.messages[2]"), the lifted IR's path in its description.
func (s *Server) Lift(ctx context.Context, req *compactorv1.LiftRequest) (*compactorv1.LiftResponse, error) {
	resp, err := format.Lift(req)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.validate(resp.GetMessages()); err != nil {
		// Lifting is deterministic: again, with the sources, only on this failure path.
		_, sources, _ := format.LiftSources(req)
		return nil, toStatus(asBodyViolations(err, sources))
	}
	return resp, nil
}

// irPart matches the IR path of a lifted message or part: messages[3], messages[3].parts[0].
var irPart = regexp.MustCompile(`^messages\[(\d+)\](?:\.parts\[(\d+)\])?`)

// asBodyViolations reports the violations of a lifted conversation at the body elements
// they come from (sources, as format.LiftSources gives them; the body itself when a path
// names no message), keeping the IR path in the description.
func asBodyViolations(err error, sources [][]string) error {
	var ve *engine.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	out := &engine.ValidationError{Limit: ve.Limit, Violations: make([]engine.FieldViolation, len(ve.Violations))}
	for i, v := range ve.Violations {
		out.Violations[i] = engine.FieldViolation{Field: bodySource(v.Field, sources),
			Description: v.Description + " (lifted as " + v.Field + ")"}
	}
	return out
}

// bodySource is the body path of the lifted message or part irPath names, else "body".
func bodySource(irPath string, sources [][]string) string {
	m := irPart.FindStringSubmatch(irPath)
	if m == nil {
		return "body"
	}
	i, _ := strconv.Atoi(m[1])
	j := 0
	if m[2] != "" {
		j, _ = strconv.Atoi(m[2])
	}
	if i >= len(sources) || len(sources[i]) == 0 {
		return "body"
	}
	return sources[i][min(j, len(sources[i])-1)]
}

package limit

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/compactord/compactord/metrics"
	"google.golang.org/grpc/tap"
)

// Bounds named in the OVERLOADED errors and metrics.
const (
	BoundCPU = "max_inflight"
	BoundLLM = "max_inflight_llm"
)

// Shedder bounds the work in flight on one server: CompactorService calls doing engine work
// (cpu) and summarizer calls to a model (llm), counted separately so that slow LLM calls do
// not starve cheap ones. Beyond a bound a new call is refused at once with UNAVAILABLE and
// RetryInfo, never queued: a queue only turns overload into deadlines. Install TapHandle
// with grpc.InTapHandle.
type Shedder struct {
	cpu, llm chan struct{} // semaphores; nil is unbounded
	metrics  *metrics.Metrics
}

// NewShedder bounds cpu and llm work; zero or less leaves a kind unbounded.
func NewShedder(maxCPU, maxLLM int, m *metrics.Metrics) *Shedder {
	s := &Shedder{metrics: m}
	if maxCPU > 0 {
		s.cpu = make(chan struct{}, maxCPU)
	}
	if maxLLM > 0 {
		s.llm = make(chan struct{}, maxLLM)
	}
	return s
}

// Retry delays suggested to refused callers: engine work lasts milliseconds, LLM calls
// seconds.
const (
	cpuRetry = 50 * time.Millisecond
	llmRetry = time.Second
)

type cpuSlotKey struct{}

// TapHandle takes a cpu slot for every CompactorService call (health and reflection pass)
// as soon as its headers arrive, and refuses the call when there is none: before its
// request is read and decoded, which is most of what a refused call would cost, and before
// it waits anywhere (for its body, for a worker). The slot is held until the call's stream
// ends, or until AdmitLLM hands it over.
func (s *Shedder) TapHandle() tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if s.cpu == nil || !strings.HasPrefix(info.FullMethodName, servicePrefix) {
			return ctx, nil
		}
		select {
		case s.cpu <- struct{}{}:
		default:
			s.metrics.Shed("cpu")
			return ctx, overloaded(BoundCPU, cpuRetry)
		}
		s.metrics.AddInflight("cpu", 1)
		release := sync.OnceFunc(func() {
			<-s.cpu
			s.metrics.AddInflight("cpu", -1)
		})
		// The stream's context ends with the stream, however it ends.
		context.AfterFunc(ctx, release)
		return context.WithValue(ctx, cpuSlotKey{}, release), nil
	}
}

// AdmitLLM takes an llm slot for a summarizer call, or refuses with UNAVAILABLE. The call's
// cpu slot is given back meanwhile: waiting on a model is not engine work. done releases the
// llm slot.
func (s *Shedder) AdmitLLM(ctx context.Context) (done func(), err error) {
	if s.llm != nil {
		select {
		case s.llm <- struct{}{}:
		default:
			s.metrics.Shed("llm")
			return nil, overloaded(BoundLLM, llmRetry)
		}
	}
	if release, ok := ctx.Value(cpuSlotKey{}).(func()); ok {
		release()
	}
	s.metrics.AddInflight("llm", 1)
	return sync.OnceFunc(func() {
		if s.llm != nil {
			<-s.llm
		}
		s.metrics.AddInflight("llm", -1)
	}), nil
}

// servicePrefix starts the full method names of CompactorService.
const servicePrefix = "/compactor.v1.CompactorService/"

// Admission admits summarizer calls to a model: the Shedder's bound on LLM calls in flight
// and the Enforcer's summarizer token budget (either may be nil). It implements
// service.SummaryAdmitter.
type Admission struct {
	Shedder  *Shedder
	Enforcer *Enforcer
}

// AdmitSummary admits one summarizer call for tenant, or refuses it; done releases its slot
// and charges the tokens it spent.
func (a Admission) AdmitSummary(ctx context.Context, tenant string) (done func(tokens int64), err error) {
	if a.Enforcer != nil {
		if err := a.Enforcer.AdmitTokens(ctx, tenant); err != nil {
			return nil, err
		}
	}
	release := func() {}
	if a.Shedder != nil {
		if release, err = a.Shedder.AdmitLLM(ctx); err != nil {
			return nil, err
		}
	}
	return func(tokens int64) {
		release()
		if a.Enforcer != nil {
			a.Enforcer.ChargeTokens(ctx, tenant, tokens)
		}
	}, nil
}

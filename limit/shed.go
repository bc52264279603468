package limit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/compactord/compactord/internal/hold"
	"github.com/compactord/compactord/metrics"
)

// Bounds named in the OVERLOADED errors and metrics.
const (
	BoundCPU = "max_inflight"
	BoundLLM = "max_inflight_llm"
)

// MemoryBudget names the bound on the memory of requests being decoded and held, in the
// RESOURCE_EXHAUSTED errors and metrics.
const MemoryBudget = "memory_budget"

// ShedOptions configure a Shedder. A zero or negative bound leaves its kind unbounded.
type ShedOptions struct {
	// MaxCPU bounds CompactorService calls doing engine work; MaxLLM summarizer calls to a
	// model.
	MaxCPU, MaxLLM int
	// MemoryBytes bounds the bytes of requests being decoded and held: their encoded copy,
	// from the moment it arrives, and what decoding it allocates, until the call and the
	// work it detached end.
	MemoryBytes int64
	// Metrics counts refusals and what is in flight; nil records nothing.
	Metrics *metrics.Recorder
}

// Shedder bounds the work in flight on one server: CompactorService calls doing engine work
// (cpu), summarizer calls to a model (llm), counted separately so that slow LLM calls do not
// starve cheap ones, and the memory of the requests being decoded and held. Beyond a bound a
// call is refused at once, never queued: a queue only turns overload into deadlines. A call
// counts against the cpu bound from the moment its request has arrived (a stream that
// sends headers and no request holds nothing), and gives its slot back while it waits on a
// model or on another call's summary (package hold). It implements service.Admitter.
type Shedder struct {
	cpu, llm chan struct{} // semaphores; nil is unbounded
	memory   int64         // the memory budget; 0 is unbounded
	inUse    atomic.Int64  // bytes of the budget reserved
	metrics  *metrics.Recorder
}

// NewShedder returns a Shedder with the bounds of o.
func NewShedder(o ShedOptions) *Shedder {
	s := &Shedder{metrics: o.Metrics, memory: max(0, o.MemoryBytes)}
	if o.MaxCPU > 0 {
		s.cpu = make(chan struct{}, o.MaxCPU)
	}
	if o.MaxLLM > 0 {
		s.llm = make(chan struct{}, o.MaxLLM)
	}
	o.Metrics.SetMemoryBudget(s.memory)
	return s
}

// Retry delays suggested to refused callers: engine work lasts milliseconds, LLM calls
// seconds; a request's memory is given back when its call ends.
const (
	cpuRetry    = 50 * time.Millisecond
	llmRetry    = time.Second
	memoryRetry = 100 * time.Millisecond
)

// AdmitCall takes a cpu slot for a CompactorService call whose request has arrived, or
// refuses it with UNAVAILABLE (OVERLOADED, RetryInfo); release gives the slot back, once.
func (s *Shedder) AdmitCall(ctx context.Context) (release func(), err error) {
	if s.cpu == nil {
		return func() {}, nil
	}
	select {
	case s.cpu <- struct{}{}:
	default:
		s.metrics.Shed(metrics.KindCPU)
		return nil, overloaded(BoundCPU, cpuRetry)
	}
	s.metrics.AddInflight(metrics.KindCPU, 1)
	return sync.OnceFunc(func() {
		<-s.cpu
		s.metrics.AddInflight(metrics.KindCPU, -1)
	}), nil
}

// AdmitBytes reserves n bytes of the memory budget, or refuses with RESOURCE_EXHAUSTED:
// with RetryInfo while other requests hold the budget, without it when n alone exceeds it.
// release gives the bytes back, once.
func (s *Shedder) AdmitBytes(n int64) (release func(), err error) {
	if s.memory == 0 || n <= 0 {
		return func() {}, nil
	}
	if n > s.memory {
		s.metrics.Shed(metrics.KindMemory)
		return nil, memoryRefusal(n, s.memory, 0)
	}
	for {
		used := s.inUse.Load()
		if used+n > s.memory {
			s.metrics.Shed(metrics.KindMemory)
			return nil, memoryRefusal(n, s.memory, memoryRetry)
		}
		if s.inUse.CompareAndSwap(used, used+n) {
			break
		}
	}
	s.metrics.AddRequestBytes(n)
	return sync.OnceFunc(func() {
		s.inUse.Add(-n)
		s.metrics.AddRequestBytes(-n)
	}), nil
}

// AdmitLLM takes an llm slot for a summarizer call, or refuses with UNAVAILABLE. The call's
// cpu slot is given back meanwhile (hold.Yield): waiting on a model is not engine work.
// done releases the llm slot.
func (s *Shedder) AdmitLLM(ctx context.Context) (done func(), err error) {
	if s.llm != nil {
		select {
		case s.llm <- struct{}{}:
		default:
			s.metrics.Shed(metrics.KindLLM)
			return nil, overloaded(BoundLLM, llmRetry)
		}
	}
	hold.Yield(ctx)
	s.metrics.AddInflight(metrics.KindLLM, 1)
	return sync.OnceFunc(func() {
		if s.llm != nil {
			<-s.llm
		}
		s.metrics.AddInflight(metrics.KindLLM, -1)
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

// AdmitSummary admits one summarizer call for tenant that may spend up to estimate tokens,
// or refuses it; done releases its slot and charges the tokens it spent.
func (a Admission) AdmitSummary(ctx context.Context, tenant string, estimate int64) (done func(tokens int64), err error) {
	settle := func(int64) {}
	if a.Enforcer != nil {
		if settle, err = a.Enforcer.ReserveTokens(ctx, tenant, estimate); err != nil {
			return nil, err
		}
	}
	release := func() {}
	if a.Shedder != nil {
		if release, err = a.Shedder.AdmitLLM(ctx); err != nil {
			settle(0)
			return nil, err
		}
	}
	return func(tokens int64) {
		release()
		settle(tokens)
	}, nil
}

package summarize

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// BreakerPolicy configures the circuit breaker of an LLM summarizer. Zero values take the
// defaults.
type BreakerPolicy struct {
	// Failures is how many consecutive failed provider calls (5xx, timeouts, network
	// errors; not 429s or other 4xx) open the breaker. Default 5; negative disables it.
	Failures int
	// Cooldown is how long the breaker stays open before one probe call is let through
	// (half-open): its success closes the breaker, its failure opens it again. Default 30s.
	Cooldown time.Duration
}

// breaker is the circuit breaker of an LLM summarizer: sony/gobreaker, as around Redis
// (cache/redis.go), with each provider call's verdict reported after the call (two-step),
// and the time it last opened kept so that a refusal can say when to retry.
type breaker struct {
	cb       *gobreaker.TwoStepCircuitBreaker[struct{}] // nil: disabled
	cooldown time.Duration
	opened   atomic.Int64 // UnixNano of the last opening
}

// Verdicts a call reports to the breaker's done function; nil is a provider that answered.
var (
	// errProviderDown counts as a failure: the provider looks down.
	errProviderDown = errors.New("provider down")
	// errNoVerdict is neither: the caller gave up, or the provider is alive but rate-limits.
	// A half-open probe that ends so lets another caller probe.
	errNoVerdict = errors.New("no verdict")
)

func newBreaker(p BreakerPolicy) *breaker {
	if p.Failures == 0 {
		p.Failures = 5
	}
	if p.Cooldown <= 0 {
		p.Cooldown = 30 * time.Second
	}
	b := &breaker{cooldown: p.Cooldown}
	if p.Failures < 0 {
		return b
	}
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:         "summarizer",
		MaxRequests:  1, // one probe at a time while half-open
		Timeout:      p.Cooldown,
		ReadyToTrip:  func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(p.Failures) },
		IsSuccessful: func(err error) bool { return err == nil },
		IsExcluded:   func(err error) bool { return errors.Is(err, errNoVerdict) },
		OnStateChange: func(_ string, _, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				b.opened.Store(time.Now().UnixNano())
			}
		},
	})
	return b
}

// allow reports whether a call may go to the provider now (in the half-open state, only one
// probe at a time); done reports its verdict: nil, errProviderDown or errNoVerdict.
func (b *breaker) allow() (done func(verdict error), ok bool) {
	if b.cb == nil {
		return func(error) {}, true
	}
	done, err := b.cb.Allow()
	return done, err == nil
}

// isOpen reports whether the breaker currently rejects calls.
func (b *breaker) isOpen() bool {
	return b.cb != nil && b.cb.State() == gobreaker.StateOpen
}

// cooldownLeft is how long an open breaker stays open; 0 when it is not open.
func (b *breaker) cooldownLeft() time.Duration {
	if !b.isOpen() {
		return 0
	}
	return max(0, b.cooldown-time.Since(time.Unix(0, b.opened.Load())))
}

package summarize

import (
	"sync"
	"time"
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
	// Now is the clock (for tests); default time.Now.
	Now func() time.Time
}

type breakerState int

const (
	breakerClosed breakerState = iota
	breakerOpen
	breakerHalfOpen
)

type breaker struct {
	policy BreakerPolicy

	mu       sync.Mutex
	state    breakerState
	failures int
	openedAt time.Time
	probing  bool // a half-open probe is in flight
}

func newBreaker(p BreakerPolicy) *breaker {
	if p.Failures == 0 {
		p.Failures = 5
	}
	if p.Cooldown <= 0 {
		p.Cooldown = 30 * time.Second
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	return &breaker{policy: p}
}

// allow reports whether a call may go to the provider now. In the half-open state only one
// probe is let through at a time.
func (b *breaker) allow() bool {
	if b.policy.Failures < 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case breakerOpen:
		if b.policy.Now().Sub(b.openedAt) < b.policy.Cooldown {
			return false
		}
		b.state = breakerHalfOpen
		b.probing = true
		return true
	case breakerHalfOpen:
		if b.probing {
			return false
		}
		b.probing = true
		return true
	}
	return true
}

// success records a call that reached a working provider.
func (b *breaker) success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state, b.failures, b.probing = breakerClosed, 0, false
}

// failure records a call that failed in a way that suggests the provider is down.
func (b *breaker) failure() {
	if b.policy.Failures < 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	if b.state == breakerHalfOpen || b.failures >= b.policy.Failures {
		b.state, b.openedAt, b.probing = breakerOpen, b.policy.Now(), false
	}
}

// release ends a half-open probe that neither succeeded nor failed (e.g. the caller's
// context ended), so another caller may probe.
func (b *breaker) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == breakerHalfOpen {
		b.probing = false
	}
}

// isOpen reports whether the breaker currently rejects calls (for tests and health).
func (b *breaker) isOpen() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == breakerOpen && b.policy.Now().Sub(b.openedAt) < b.policy.Cooldown
}

// cooldownLeft is how long an open breaker stays open; 0 when it is not open.
func (b *breaker) cooldownLeft() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != breakerOpen {
		return 0
	}
	return max(0, b.policy.Cooldown-b.policy.Now().Sub(b.openedAt))
}

package main

import (
	"context"
	"fmt"
	"time"
)

// trial is a scenario under measurement: its payload, what its slices have gathered so far,
// and the baseline slices run right before them.
type trial struct {
	sc     *Scenario
	p      *Payload
	r, b   *Result // b is nil for the baseline's own trial
	calls  int64   // fake-LLM calls during the measured slices
	slices int     // measured slices so far
	// env, when set, is a floor server the trial runs against, baseline slices included,
	// instead of the replicas.
	env *env
}

// label names t in the console output.
func (t *trial) label() string {
	if t.env != nil {
		return "floor " + t.sc.Name
	}
	return t.sc.Name
}

func newTrial(sc *Scenario, p *Payload, base *Scenario) *trial {
	t := &trial{sc: sc, p: p, r: &Result{Name: sc.Name, Call: sc.Call, Concurrency: sc.Concurrency, Target: sc.Target}}
	if base != nil {
		t.b = &Result{Name: base.Name, Call: base.Call, Concurrency: base.Concurrency}
	}
	return t
}

// slice runs one measured slice of t (the scenario's duration over its slices), right
// after an equally long slice of the baseline when t has one, and checks the servers
// survived; before t's first slice it runs the scenario's unmeasured warm-up. It returns the
// scenario slice's result.
func (e *env) slice(ctx context.Context, t *trial, base *Scenario, bp *Payload) (*Result, error) {
	if t.env != nil {
		e = t.env
	}
	sc := t.sc
	if t.slices == 0 && sc.Warmup > 0 {
		if _, err := e.load(sc, t.p, time.Duration(sc.Warmup)); err != nil {
			return nil, fmt.Errorf("%s warm-up: %w", sc.Name, err)
		}
	}
	d := time.Duration(sc.Duration) / time.Duration(sc.Slices)
	var br *Result
	if t.b != nil {
		var err error
		if br, err = e.load(base, bp, d); err != nil {
			return nil, fmt.Errorf("%s (baseline slice for %s): %w", base.Name, sc.Name, err)
		}
		t.b.add(br)
	}
	before := e.llm.Calls()
	sr, err := e.load(sc, t.p, d)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sc.Name, err)
	}
	t.calls += e.llm.Calls() - before
	t.r.add(sr)
	t.slices++
	if br != nil && br.RPS() > 0 {
		t.r.SliceRatios = append(t.r.SliceRatios, sr.RPS()/br.RPS())
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := e.alive(); err != nil {
		return nil, fmt.Errorf("during %s: %w", sc.Name, err)
	}
	return sr, nil
}

// finish computes t's percentiles and notes its fake-LLM calls.
func (t *trial) finish() {
	t.r.finish()
	if t.b != nil {
		t.b.finish()
	}
	if t.sc.Cache != "" || t.calls > 0 {
		per := 0.0
		if t.r.Requests > 0 {
			per = float64(t.calls) / float64(t.r.Requests)
		}
		t.r.Notes = append(t.r.Notes, fmt.Sprintf("fake-LLM calls during the measured run: %d (%.2f per request)", t.calls, per))
	}
}

// rounds measures the trials in rounds, each giving every trial that runs in it one slice,
// in order, until every trial has its scenario's slices. With soak set, every trial runs in
// every round, the rounds go on until soak.Duration has passed (the last one stops part-way
// there), and the servers' memory is sampled after each slice of a trial against the
// replicas (sample reads every server's RSS).
func (e *env) rounds(ctx context.Context, trials []*trial, base *Scenario, bp *Payload, soak *Soak, sample func() []int64) error {
	start := time.Now()
	done := func() bool {
		for _, t := range trials {
			if t.slices < t.sc.Slices {
				return false
			}
		}
		return soak == nil || time.Since(start) >= soak.Duration
	}
	for round := 1; !done(); round++ {
		for i, t := range trials {
			if done() {
				if soak != nil {
					soak.Partial = i > 0
				}
				break
			}
			if soak == nil && t.slices >= t.sc.Slices {
				continue
			}
			sr, err := e.slice(ctx, t, base, bp)
			if err != nil {
				return err
			}
			rss := sample()
			msg := fmt.Sprintf("round %d %-32s %8d req %8.0f RPS  errors %d", round, t.label(), sr.Requests, sr.RPS(), sr.Errors)
			if n := len(t.r.SliceRatios); n > 0 {
				msg += fmt.Sprintf("  ratio %.2f", t.r.SliceRatios[n-1])
			}
			if soak != nil && t.env == nil {
				heap, err := e.heap(ctx)
				if err != nil {
					return fmt.Errorf("soak %s: %w", t.sc.Name, err)
				}
				soak.Samples = append(soak.Samples, SoakSample{Elapsed: time.Since(start), Scenario: t.sc.Name, Requests: sr.Requests, Errors: sr.Errors, RSSKiB: rss[:len(e.replicas)], Heap: heap})
				soak.Rounds = round
				msg += fmt.Sprintf("  rss %v KiB", rss)
			}
			logf("%s", msg)
		}
	}
	if soak != nil {
		soak.Duration = time.Since(start)
		// Compare the end with the first slice of the same scenario, so both samples
		// follow the same kind of load.
		if n := len(soak.Samples); n > 0 {
			for i, x := range soak.Samples {
				if x.Scenario == soak.Samples[n-1].Scenario {
					soak.RefIndex = i
					break
				}
			}
		}
	}
	return nil
}

// fillConcurrency multiplies the concurrency of the cache-miss scenarios the soak fills the
// stores with.
const fillConcurrency = 4

// fill runs the cache-miss trials for d each before the soak: every call adds new entries
// to the replicas' bounded stores, so that the soak starts at the steady state where they
// are full and evict, and memory that still grows is not their filling.
func (e *env) fill(ctx context.Context, trials []*trial, d time.Duration, soak *Soak) error {
	for _, t := range trials {
		if t.sc.Cache != "miss" || d <= 0 {
			continue
		}
		// A miss scenario's rate is bounded by its calls in flight, each waiting out the fake
		// LLM's fixed latency, not by CPU: more of them fill the stores sooner.
		filler := *t.sc
		filler.Concurrency *= fillConcurrency
		r, err := e.load(&filler, t.p, d)
		if err != nil {
			return fmt.Errorf("soak fill %s: %w", t.sc.Name, err)
		}
		heap, err := e.heap(ctx)
		if err != nil {
			return fmt.Errorf("soak fill: %w", err)
		}
		soak.Fill = append(soak.Fill, SoakFill{Scenario: t.sc.Name, Concurrency: filler.Concurrency, Duration: d, Requests: r.Requests, Errors: r.Errors, Heap: heap})
		logf("soak fill %-22s %8d req errors %d stores %v", t.sc.Name, r.Requests, r.Errors, heap)
	}
	return nil
}

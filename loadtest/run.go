package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/bojand/ghz/runner"
	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// replica is one compactord process under load.
type replica struct {
	name    string
	addr    string
	metrics string // address of its /metrics
	proc    *proc
	conn    *grpc.ClientConn // direct connection for preflight calls
}

// env is what every scenario runs against.
type env struct {
	host     string // ghz target: the round-robin resolver over every replica
	protoset []byte
	replicas []*replica
	llm      *FakeLLM
	// seq numbers the unique requests of cache-miss scenarios across all runs, so no two
	// calls ever share a prefix.
	seq atomic.Int64
}

// callTimeout bounds every call: the slowest scenario (a summarizer call behind a fixed
// latency) is far below it.
const callTimeout = 30 * time.Second

// alive returns an error naming the first replica that has exited.
func (e *env) alive() error {
	for _, r := range e.replicas {
		if done, err := r.proc.exited(); done {
			return fmt.Errorf("%s exited (%v); log:\n%s", r.name, err, r.proc.lastLines(20))
		}
	}
	return nil
}

// invoke makes one call on a replica with the generated types.
func invoke(ctx context.Context, r *replica, sc *Scenario, req proto.Message) (proto.Message, error) {
	_, outType, err := methodTypes(sc.Call)
	if err != nil {
		return nil, err
	}
	out := outType.New().Interface()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := r.conn.Invoke(ctx, sc.Method(), req, out); err != nil {
		return nil, fmt.Errorf("%s on %s: %w", sc.Call, r.name, err)
	}
	return out, nil
}

// preflight makes the scenario's checking calls before any load, so a missing RPC or a bad
// payload fails with the server's own error, and cache scenarios prove they hit or miss.
func (e *env) preflight(ctx context.Context, sc *Scenario, p *Payload) ([]string, error) {
	switch sc.Cache {
	case "":
		_, err := invoke(ctx, e.replicas[0], sc, p.Request)
		return nil, err
	case "hit":
		if _, err := invoke(ctx, e.replicas[0], sc, p.Request); err != nil {
			return nil, fmt.Errorf("warming call: %w", err)
		}
		for _, r := range e.replicas {
			out, err := invoke(ctx, r, sc, p.Request)
			if err != nil {
				return nil, err
			}
			if st := cacheStatus(out); st != compactorv1.CacheStatus_CACHE_STATUS_HIT {
				return nil, fmt.Errorf("after the warming call on %s, %s answered cache_status %s, want CACHE_STATUS_HIT", e.replicas[0].name, r.name, st)
			}
		}
		return []string{fmt.Sprintf("warmed by one call on %s, then a preflight call on each of the %d replicas returned CACHE_STATUS_HIT", e.replicas[0].name, len(e.replicas))}, nil
	case "miss":
		if e.llm == nil {
			return nil, errors.New("cache miss scenario without the fake LLM")
		}
		before := e.llm.Calls()
		for _, r := range e.replicas {
			req, err := uniqueRequest(p.Request, e.seq.Add(1))
			if err != nil {
				return nil, err
			}
			out, err := invoke(ctx, r, sc, req)
			if err != nil {
				return nil, err
			}
			if st := cacheStatus(out); st != compactorv1.CacheStatus_CACHE_STATUS_MISS {
				return nil, fmt.Errorf("%s answered a unique request with cache_status %s, want CACHE_STATUS_MISS", r.name, st)
			}
		}
		if got := e.llm.Calls() - before; got < int64(len(e.replicas)) {
			return nil, fmt.Errorf("%d cache misses made %d fake-LLM calls; the summarizer is not the fake LLM", len(e.replicas), got)
		}
		return []string{fmt.Sprintf("a unique preflight call on each of the %d replicas returned CACHE_STATUS_MISS and called the fake LLM", len(e.replicas))}, nil
	}
	return nil, fmt.Errorf("unknown cache mode %q", sc.Cache)
}

func cacheStatus(m proto.Message) compactorv1.CacheStatus {
	if r, ok := m.(*compactorv1.CompactResponse); ok {
		return r.GetCacheStatus()
	}
	return compactorv1.CacheStatus_CACHE_STATUS_UNSPECIFIED
}

// load drives sc with ghz for d and summarizes the run.
func (e *env) load(sc *Scenario, p *Payload, d time.Duration) (*Result, error) {
	opts := []runner.Option{
		runner.WithProtosetBinary(e.protoset),
		runner.WithInsecure(true),
		runner.WithConcurrency(sc.Concurrency),
		runner.WithWorkerTicker(newConstWorkers(sc.Concurrency)),
		runner.WithRunDuration(d),
		// Let in-flight calls finish: closing the connection would count them as errors.
		runner.WithDurationStopAction("wait"),
		runner.WithTimeout(callTimeout),
		runner.WithClientLoadBalancing("round_robin"),
		// Corpus text may contain "{{"; requests are never templates.
		runner.WithDisableTemplateData(true),
		runner.WithDisableTemplateFuncs(true),
		runner.WithName(sc.Name),
	}
	codec := newLoadCodec(true)
	if sc.Cache == "miss" {
		base := p.Request
		codec.gen = func() ([]byte, error) {
			req, err := uniqueRequest(base, e.seq.Add(1))
			if err != nil {
				return nil, err
			}
			return proto.Marshal(req)
		}
	}
	opts = append(opts, runner.WithDefaultCallOptions(codec.callOptions()))
	b, err := proto.Marshal(p.Request)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		// ghz takes empty binary data for no data at all.
		opts = append(opts, runner.WithDataFromJSON("{}"))
	} else {
		opts = append(opts, runner.WithBinaryData(b))
	}
	srv0, cli0 := e.serverCPU(), selfCPU()
	rep, err := runner.Run(sc.Call, e.host, opts...)
	rearmSignals()
	srv1, cli1 := e.serverCPU(), selfCPU()
	if err != nil {
		// ghz joins every failed call's error into one; keep the start.
		return nil, fmt.Errorf("ghz: %s", oneLine(err.Error(), 500))
	}
	r := resultFrom(sc, rep)
	r.ServerCPU, r.ClientCPU = srv1-srv0, cli1-cli0
	return r, nil
}

// serverCPU is the CPU time all replicas have used so far.
func (e *env) serverCPU() time.Duration {
	var sum time.Duration
	for _, r := range e.replicas {
		if t, err := cpuTime(r.proc.cmd.Process.Pid); err == nil {
			sum += t
		}
	}
	return sum
}

// selfCPU is the CPU time the driver (ghz included) has used so far.
func selfCPU() time.Duration {
	t, _ := cpuTime(os.Getpid())
	return t
}

// resultFrom summarizes a ghz report: percentiles over the calls that returned OK.
func resultFrom(sc *Scenario, rep *runner.Report) *Result {
	r := &Result{
		Name:        sc.Name,
		Call:        sc.Call,
		Concurrency: sc.Concurrency,
		Elapsed:     rep.Total,
		Requests:    rep.Count,
		ErrorDist:   map[string]int{},
		Target:      sc.Target,
	}
	lat := make([]time.Duration, 0, len(rep.Details))
	for _, d := range rep.Details {
		if d.Error != "" {
			continue
		}
		lat = append(lat, d.Latency)
	}
	for k, n := range rep.ErrorDist {
		r.ErrorDist[k] += n
		r.Errors += uint64(n)
	}
	r.lat = lat
	r.finish()
	return r
}

// heap scrapes every replica's memory series, in replica order.
func (e *env) heap(ctx context.Context) ([]heapState, error) {
	out := make([]heapState, len(e.replicas))
	for i, r := range e.replicas {
		h, err := scrapeHeap(ctx, r.metrics)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.name, err)
		}
		out[i] = h
	}
	return out, nil
}

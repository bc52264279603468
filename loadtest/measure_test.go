package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// countingServer is a gRPC health server on a loopback port that counts the calls it serves.
type countingServer struct {
	addr  string
	calls atomic.Int64
}

func startCounting(t *testing.T) *countingServer {
	t.Helper()
	s := &countingServer{}
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		s.calls.Add(1)
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	s.addr = lis.Addr().String()
	return s
}

// envFor is an env whose one replica is s, with this process standing in for the replica's
// process (for its CPU time and liveness).
func envFor(t *testing.T, s *countingServer, set []byte, llm *FakeLLM) *env {
	t.Helper()
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: s.addr, cmd: &exec.Cmd{Process: self}, done: make(chan struct{})}
	return &env{host: s.addr, protoset: set, replicas: []*replica{{name: s.addr, addr: s.addr, proc: p}}, llm: llm}
}

// A floor trial runs in the same rounds as the others, with every one of its slices,
// baseline slices included, against its own server; the other trials' slices go to the
// replicas. Each trial gets its scenario's slices, and a ratio per slice. Slices last half a
// second: at 100 ms, a slice on a loaded CI machine could end before ghz made a call, and a
// slice without calls has no ratio.
func TestRoundsRouteFloorTrials(t *testing.T) {
	set, err := descriptorSet()
	if err != nil {
		t.Fatal(err)
	}
	llm := &FakeLLM{}
	main, floor := startCounting(t), startCounting(t)
	e, fe := envFor(t, main, set, llm), envFor(t, floor, set, llm)
	base := &Scenario{Name: "health", Call: "grpc.health.v1.Health/Check", Concurrency: 2, Duration: Duration(1500 * time.Millisecond), Slices: 3}
	sc := *base
	sc.Name = "check"
	p := &Payload{Request: &healthpb.HealthCheckRequest{}}
	t1 := newTrial(&sc, p, base)
	t2 := newTrial(&sc, p, base)
	t2.env = fe
	if err := e.rounds(context.Background(), []*trial{t1, t2}, base, p, nil, func() []int64 { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		tr    *trial
		calls int64
	}{{"replica trial", t1, main.calls.Load()}, {"floor trial", t2, floor.calls.Load()}} {
		if tc.tr.slices != 3 || len(tc.tr.r.SliceRatios) != 3 {
			t.Errorf("%s: %d slices, %d ratios; want 3 and 3", tc.name, tc.tr.slices, len(tc.tr.r.SliceRatios))
		}
		if tc.tr.r.Requests == 0 || tc.tr.b.Requests == 0 {
			t.Errorf("%s: %d requests, %d baseline requests", tc.name, tc.tr.r.Requests, tc.tr.b.Requests)
		}
		if got := int64(tc.tr.r.Requests + tc.tr.b.Requests); got != tc.calls {
			t.Errorf("%s: its slices made %d calls, its server served %d", tc.name, got, tc.calls)
		}
	}
	if t2.label() != "floor check" || t1.label() != "check" {
		t.Errorf("labels %q, %q", t1.label(), t2.label())
	}
}

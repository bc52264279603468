package service

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/irtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// meteredAdmitter admits everything and counts the calls and the bytes it holds.
type meteredAdmitter struct{ calls, bytes atomic.Int64 }

func (m *meteredAdmitter) AdmitCall(context.Context) (func(), error) {
	m.calls.Add(1)
	return sync.OnceFunc(func() { m.calls.Add(-1) }), nil
}

func (m *meteredAdmitter) AdmitBytes(n int64) (func(), error) {
	m.bytes.Add(n)
	return sync.OnceFunc(func() { m.bytes.Add(-n) }), nil
}

// marshalProbe is the server's codec, recording what the admitter holds whenever it
// marshals a CompactorService response.
type marshalProbe struct {
	*codec
	admit *meteredAdmitter
	mu    sync.Mutex
	held  map[string][2]int64 // response type → calls and bytes held while it was marshalled
}

func (p *marshalProbe) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(proto.Message); ok {
		if name := string(m.ProtoReflect().Descriptor().FullName()); strings.HasPrefix(name, "compactor.v1.") {
			p.mu.Lock()
			p.held[name] = [2]int64{p.admit.calls.Load(), p.admit.bytes.Load()}
			p.mu.Unlock()
		}
	}
	return p.codec.Marshal(v)
}

// TestBudgetHeldWhileResponseMarshals (issue 33): a call's request memory and its slot are
// held until gRPC has marshalled its response, whose strings point into the request's
// buffer, and are given back once the call is over.
func TestBudgetHeldWhileResponseMarshals(t *testing.T) {
	admit := &meteredAdmitter{}
	probe := &marshalProbe{codec: newCodec(admit), admit: admit, held: map[string][2]int64{}}
	g := NewGRPC(New(Options{}), GRPCOptions{Admit: admit, ServerOptions: []grpc.ServerOption{grpc.ForceServerCodecV2(probe)}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	defer g.Server.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := compactorv1.NewCompactorServiceClient(conn)
	ctx := t.Context()
	msgs := irtest.Conversation(6)
	policy := &compactorv1.Policy{ContextWindow: 8000}
	lowered, err := client.Lower(ctx, &compactorv1.LowerRequest{Messages: msgs, Provider: compactorv1.Provider_PROVIDER_OPENAI_CHAT, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"Plan": func() error {
			_, err := client.Plan(ctx, &compactorv1.PlanRequest{Messages: msgs, Policy: policy})
			return err
		},
		"Compact": func() error {
			_, err := client.Compact(ctx, &compactorv1.CompactRequest{Messages: msgs, Policy: policy})
			return err
		},
		"Lift": func() error {
			_, err := client.Lift(ctx, &compactorv1.LiftRequest{Body: lowered.GetBody()})
			return err
		},
	}
	for name, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for (admit.calls.Load() != 0 || admit.bytes.Load() != 0) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if c, b := admit.calls.Load(), admit.bytes.Load(); c != 0 || b != 0 {
			t.Errorf("after %s: %d slots and %d bytes still held", name, c, b)
		}
	}
	probe.mu.Lock()
	defer probe.mu.Unlock()
	for _, resp := range []string{"PlanResponse", "CompactResponse", "LowerResponse", "LiftResponse"} {
		held, ok := probe.held["compactor.v1."+resp]
		switch {
		case !ok:
			t.Errorf("no %s was marshalled", resp)
		case held[0] != 1 || held[1] <= 0:
			t.Errorf("while its %s was marshalled, the call held %d slots and %d bytes of the memory budget, want its slot and its request's bytes", resp, held[0], held[1])
		}
	}
}

package service_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/hostile"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/internal/rawh2"
	"github.com/compactord/compactord/limit"
	"github.com/compactord/compactord/service"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// serveTCP serves s with o on a loopback port and returns its address and a client
// connection.
func serveTCP(t *testing.T, s compactorv1.CompactorServiceServer, o service.GRPCOptions) (string, *grpc.ClientConn) {
	t.Helper()
	g := service.NewGRPC(s, o)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Server.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return lis.Addr().String(), conn
}

// retryInfo reports whether err carries RetryInfo.
func retryInfo(err error) bool {
	for _, d := range status.Convert(err).Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			return true
		}
	}
	return false
}

// TestHostileRequestsOverGRPC: requests nested past the depth limit, with elements past the
// decoding bound, or that are not protobuf are each refused with their documented code and
// a BadRequest naming the field, on every method, and the server serves on.
func TestHostileRequestsOverGRPC(t *testing.T) {
	_, conn := serveTCP(t, service.New(service.Options{}), service.GRPCOptions{})
	methods := []string{compactorv1.CompactorService_Plan_FullMethodName, compactorv1.CompactorService_Compact_FullMethodName,
		compactorv1.CompactorService_Lower_FullMethodName}
	cases := []struct {
		name  string
		wire  []byte
		code  codes.Code
		field string // prefix of the field named
	}{
		{"nested parts", hostile.NestedParts(100_000), codes.ResourceExhausted, "messages[0].parts[0].tool_result.output.content.parts[0]"},
		{"nested struct", hostile.NestedStruct(100_000), codes.ResourceExhausted, "messages[0].provider_options[0].value.fields[0]"},
		{"empty messages", hostile.EmptyMessages(1 << 20), codes.ResourceExhausted, "messages["},
	}
	for name, b := range hostile.Malformed() {
		cases = append(cases, struct {
			name  string
			wire  []byte
			code  codes.Code
			field string
		}{name, b, codes.InvalidArgument, ""})
	}
	for _, tc := range cases {
		for _, m := range methods {
			var resp compactorv1.PlanResponse
			err := conn.Invoke(t.Context(), m, tc.wire, &resp, grpc.ForceCodec(rawCodec{}))
			if field := BadRequestField(t, err, tc.code); !strings.HasPrefix(field, tc.field) || field == "" {
				t.Errorf("%s, %s: field %q, want one starting %q", tc.name, m, field, tc.field)
			}
		}
	}
	if _, err := compactorv1.NewCompactorServiceClient(conn).Plan(t.Context(), &compactorv1.PlanRequest{
		Messages: irtest.Conversation(4), Policy: &compactorv1.Policy{ContextWindow: 8000}}); err != nil {
		t.Errorf("a valid Plan after the hostile ones: %v", err)
	}
}

// recordingAdmitter admits everything and counts what it was asked.
type recordingAdmitter struct{ calls, bytes atomic.Int64 }

func (r *recordingAdmitter) AdmitCall(context.Context) (func(), error) {
	r.calls.Add(1)
	return func() {}, nil
}

func (r *recordingAdmitter) AdmitBytes(int64) (func(), error) {
	r.bytes.Add(1)
	return func() {}, nil
}

// TestRefusedCallsAreNotDecoded: a caller the interceptors refuse (no credentials) has its
// request neither read into memory nor decoded, however hostile it is.
func TestRefusedCallsAreNotDecoded(t *testing.T) {
	admit := &recordingAdmitter{}
	deny := func(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
		return nil, status.Error(codes.Unauthenticated, "no credentials")
	}
	_, conn := serveTCP(t, service.New(service.Options{}), service.GRPCOptions{Admit: admit, UnaryInterceptors: []grpc.UnaryServerInterceptor{deny}})
	var resp compactorv1.PlanResponse
	err := conn.Invoke(t.Context(), compactorv1.CompactorService_Plan_FullMethodName, hostile.NestedParts(100_000), &resp, grpc.ForceCodec(rawCodec{}))
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("an unauthenticated hostile request: %v, want UNAUTHENTICATED", err)
	}
	if c, b := admit.calls.Load(), admit.bytes.Load(); c != 0 || b != 0 {
		t.Errorf("the refused request was admitted (%d calls, %d byte reservations)", c, b)
	}
}

// TestHeaderOnlyStreamsHoldNoSlot: one connection opening a hundred streams that send their
// headers and never a request takes none of the server's slots: a Plan from another
// connection is served at once.
func TestHeaderOnlyStreamsHoldNoSlot(t *testing.T) {
	shed := limit.NewShedder(limit.ShedOptions{MaxCPU: 2})
	addr, conn := serveTCP(t, service.New(service.Options{}), service.GRPCOptions{Admit: shed})
	raw, err := rawh2.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for range 100 {
		if _, err := raw.OpenStream(compactorv1.CompactorService_Plan_FullMethodName); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // the server has read the headers
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := compactorv1.NewCompactorServiceClient(conn).Plan(ctx, &compactorv1.PlanRequest{
		Messages: irtest.Conversation(4), Policy: &compactorv1.Policy{ContextWindow: 8000}}); err != nil {
		t.Errorf("a Plan while another connection holds 100 streams without requests: %v", err)
	}
	if !raw.Open() {
		t.Error("the server closed the connection of the idle streams")
	}
}

// TestMemoryBudget: a request larger than the whole budget is refused for good (no
// RetryInfo); one that does not fit while another request's bytes are held is refused with
// RetryInfo; a request whose stream stays open after its message has its bytes dropped
// after a second, and the budget serves others again.
func TestMemoryBudget(t *testing.T) {
	const budget = 1 << 20
	shed := limit.NewShedder(limit.ShedOptions{MemoryBytes: budget})
	addr, conn := serveTCP(t, service.New(service.Options{}), service.GRPCOptions{Admit: shed})
	client := compactorv1.NewCompactorServiceClient(conn)
	plan := func(textBytes int) error {
		_, err := client.Plan(t.Context(), &compactorv1.PlanRequest{Messages: []*compactorv1.Message{irtest.User(strings.Repeat("x", textBytes))},
			Policy: &compactorv1.Policy{ContextWindow: 1 << 30, Tokenizer: "approx"}})
		return err
	}
	if err := plan(budget + 1); status.Code(err) != codes.ResourceExhausted || retryInfo(err) {
		t.Errorf("a request larger than the budget: %v, want RESOURCE_EXHAUSTED without RetryInfo", err)
	}
	raw, err := rawh2.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	id, err := raw.OpenStream(compactorv1.CompactorService_Plan_FullMethodName)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.SendMessage(id, hostile.EmptyMessages(350_000), false); err != nil { // 700 KB, stream left open
		t.Fatal(err)
	}
	held := time.Now()
	var refused error
	for time.Since(held) < 500*time.Millisecond && refused == nil {
		if err := plan(500_000); err != nil {
			refused = err
		}
	}
	if status.Code(refused) != codes.ResourceExhausted || !retryInfo(refused) {
		t.Errorf("a request while another's bytes fill the budget: %v, want RESOURCE_EXHAUSTED with RetryInfo", refused)
	}
	var served error = errors.New("not tried")
	for time.Since(held) < 5*time.Second && served != nil {
		served = plan(500_000)
		time.Sleep(50 * time.Millisecond)
	}
	if served != nil {
		t.Errorf("5 s after a request left its stream open, its bytes still hold the budget: %v", served)
	}
}

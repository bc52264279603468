package service_test

import (
	"bytes"
	"context"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/metrics"
	"github.com/compactord/compactord/service"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
)

// panicky is a test service whose EmptyCall panics, to exercise panic recovery.
type panicky struct {
	testgrpc.UnimplementedTestServiceServer
}

func (panicky) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	panic("handler bug")
}

// startBufconn serves s (plus the panicking test service) over an in-memory listener and
// returns a connected client.
func startBufconn(t testing.TB, s compactorv1.CompactorServiceServer) *grpc.ClientConn {
	t.Helper()
	return startBufconnWith(t, s, service.GRPCOptions{})
}

// startBufconnWith is startBufconn with the server's options.
func startBufconnWith(t testing.TB, s compactorv1.CompactorServiceServer, o service.GRPCOptions) *grpc.ClientConn {
	t.Helper()
	g := service.NewGRPC(s, o)
	testgrpc.RegisterTestServiceServer(g.Server, panicky{})
	lis := bufconn.Listen(1 << 20)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Server.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestPanicBecomesInternalAndServerKeepsServing(t *testing.T) {
	conn := startBufconn(t, service.New(service.Options{}))
	ctx := t.Context()
	for range 2 {
		_, err := testgrpc.NewTestServiceClient(conn).EmptyCall(ctx, &testgrpc.Empty{})
		if status.Code(err) != codes.Internal {
			t.Fatalf("EmptyCall = %v, want INTERNAL", err)
		}
		if s := status.Convert(err).Message(); s != "internal error" {
			t.Errorf("panic leaked into the status message: %q", s)
		}
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health after panics = %v, %v; want SERVING", resp, err)
	}
}

// TestPanicInInterceptorBecomesInternal: recovery is the outermost interceptor, so a panic
// in any other (authentication, limits, logging, metrics) is an INTERNAL answer, logged
// and counted, and the process serves on.
func TestPanicInInterceptorBecomesInternal(t *testing.T) {
	boom := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if strings.HasSuffix(info.FullMethod, "/Plan") {
			panic("interceptor bug")
		}
		return h(ctx, req)
	}
	reg := prometheus.NewRegistry()
	conn := startBufconnWith(t, service.New(service.Options{}), service.GRPCOptions{Metrics: metrics.New(reg),
		UnaryInterceptors: []grpc.UnaryServerInterceptor{boom}})
	_, err := compactorv1.NewCompactorServiceClient(conn).Plan(t.Context(), &compactorv1.PlanRequest{})
	if status.Code(err) != codes.Internal || status.Convert(err).Message() != "internal error" {
		t.Fatalf("Plan through a panicking interceptor = %v, want INTERNAL \"internal error\"", err)
	}
	if got := counted(t, reg, "Plan", "Internal"); got != 1 {
		t.Errorf("the panicking call counted %v times as Internal, want 1", got)
	}
	if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health after the panic: %v", err)
	}
}

func TestInvalidConversationIsBadRequest(t *testing.T) {
	conn := startBufconn(t, service.New(service.Options{}))
	client := compactorv1.NewCompactorServiceClient(conn)
	bad := []*compactorv1.Message{
		{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "hi"}}}}},
		{Role: compactorv1.Role_ROLE_TOOL, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_ToolResult{ToolResult: &compactorv1.ToolResultPart{
			ToolCallId: "call_1", Output: &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: "x"}}}}}}},
	}
	calls := map[string]func() error{
		"Plan": func() error {
			_, err := client.Plan(t.Context(), &compactorv1.PlanRequest{Messages: bad})
			return err
		},
		"Compact": func() error {
			_, err := client.Compact(t.Context(), &compactorv1.CompactRequest{Messages: bad})
			return err
		},
		"Lower": func() error {
			_, err := client.Lower(t.Context(), &compactorv1.LowerRequest{Messages: bad, Provider: compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			field := BadRequestField(t, call(), codes.InvalidArgument)
			if field != "messages[1].parts[0].tool_result.tool_call_id" {
				t.Errorf("field = %q", field)
			}
		})
	}
}

func TestSizeLimitIsResourceExhausted(t *testing.T) {
	conn := startBufconn(t, service.New(service.Options{Limits: engineLimits(1)}))
	msgs := []*compactorv1.Message{
		{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "a"}}}}},
		{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "b"}}}}},
	}
	_, err := compactorv1.NewCompactorServiceClient(conn).Plan(t.Context(), &compactorv1.PlanRequest{Messages: msgs})
	if got := BadRequestField(t, err, codes.ResourceExhausted); got != "messages" {
		t.Errorf("field = %q, want messages", got)
	}
}

// BadRequestField asserts err has the given code and a google.rpc.BadRequest detail, and
// returns the first violation's field.
func BadRequestField(t *testing.T, err error, code codes.Code) string {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code {
		t.Fatalf("error = %v, want %v", err, code)
	}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	t.Fatalf("no BadRequest detail in %v", st.Proto())
	return ""
}

// rawCodec sends requests that are already encoded ([]byte) as they are, so a test can send
// bytes no protobuf library would produce, and decodes responses with the protobuf runtime.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }

func (rawCodec) Unmarshal(data []byte, v any) error { return proto.Unmarshal(data, v.(proto.Message)) }

// A request with a string that is not UTF-8, which the protobuf runtime would refuse to
// decode, is bad input: INVALID_ARGUMENT with a BadRequest naming the field (not the
// INTERNAL gRPC gives any codec error); the server keeps serving.
func TestInvalidUTF8RequestNamesTheField(t *testing.T) {
	conn := startBufconn(t, service.New(service.Options{}))
	req := &compactorv1.PlanRequest{Messages: []*compactorv1.Message{
		{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "héllo"}}}}},
	}, Policy: &compactorv1.Policy{ContextWindow: 8000}}
	wire, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	wire[bytes.Index(wire, []byte("é"))+1] = 'x' // a lead byte without its continuation
	var resp compactorv1.PlanResponse
	err = conn.Invoke(t.Context(), compactorv1.CompactorService_Plan_FullMethodName, wire, &resp, grpc.ForceCodec(rawCodec{}))
	const field = "messages[0].parts[0].text.text"
	if got := BadRequestField(t, err, codes.InvalidArgument); got != field || !strings.Contains(err.Error(), field+": string field contains invalid UTF-8") {
		t.Fatalf("got %v (field %q), want INVALID_ARGUMENT naming %s", err, got, field)
	}
	if _, err := compactorv1.NewCompactorServiceClient(conn).Plan(t.Context(), req); err != nil {
		t.Fatalf("valid request after the invalid one: %v", err)
	}
}

// Calls run on a pool of reused goroutines (whose stacks have already grown), not on a new
// goroutine each: sequential calls, many more than there are workers, see few goroutines.
func TestCallsReuseGoroutines(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	record := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		buf := make([]byte, 64)
		id, _, _ := strings.Cut(strings.TrimPrefix(string(buf[:runtime.Stack(buf, false)]), "goroutine "), " ")
		mu.Lock()
		seen[id] = true
		mu.Unlock()
		return h(ctx, req)
	}
	conn := startBufconnWith(t, service.New(service.Options{}), service.GRPCOptions{UnaryInterceptors: []grpc.UnaryServerInterceptor{record}})
	calls := 4 * 8 * runtime.GOMAXPROCS(0)
	for range calls {
		if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) > calls/2 {
		t.Fatalf("%d calls ran on %d goroutines, want reuse", calls, len(seen))
	}
	t.Logf("%d calls ran on %d goroutines", calls, len(seen))
}

// TestNewGRPCWiresMetrics checks that the one server constructor counts calls (the rejected
// ones included: the codec's INVALID_ARGUMENT comes after the metrics) and creates a series
// for every method before its first call.
func TestNewGRPCWiresMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	conn := startBufconnWith(t, service.New(service.Options{}), service.GRPCOptions{Metrics: metrics.New(reg)})
	before := counted(t, reg, "Plan", "OK")
	if before != 0 {
		t.Fatalf("Plan OK series = %v before any call, want a zero series", before)
	}
	client := compactorv1.NewCompactorServiceClient(conn)
	if _, err := client.Plan(t.Context(), &compactorv1.PlanRequest{Messages: []*compactorv1.Message{{
		Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "hi"}}}},
	}}, Policy: &compactorv1.Policy{ContextWindow: 8000}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Plan(t.Context(), &compactorv1.PlanRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty Plan = %v, want INVALID_ARGUMENT", err)
	}
	if got := counted(t, reg, "Plan", "OK"); got != 1 {
		t.Errorf("Plan OK = %v, want 1", got)
	}
	if got := counted(t, reg, "Plan", "InvalidArgument"); got != 1 {
		t.Errorf("Plan InvalidArgument = %v, want 1", got)
	}
}

// counted returns grpc_server_handled_total for a CompactorService method and code, or -1
// when the series does not exist.
func counted(t *testing.T, reg *prometheus.Registry, method, code string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "grpc_server_handled_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["grpc_service"] == "compactor.v1.CompactorService" && l["grpc_method"] == method && l["grpc_code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

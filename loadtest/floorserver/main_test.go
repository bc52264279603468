package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// start runs the floor server on a loopback port answering method with resp, and returns a
// client connection to it and what it logged so far.
func start(t *testing.T, method string, resp proto.Message) (*grpc.ClientConn, *syncBuffer) {
	t.Helper()
	b, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "resp.pb")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	logs := &syncBuffer{}
	go func() { done <- run(ctx, []string{"-method", method, "-response", path}, logs, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("run: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, logs
}

func TestAnswersWithTheResponse(t *testing.T) {
	want := &compactorv1.LowerResponse{Body: `{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"hi"},`, 100) + `{}]}`, Warnings: []string{"w"}, Cursor: 7}
	conn, logs := start(t, compactorv1.CompactorService_Lower_FullMethodName, want)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := compactorv1.NewCompactorServiceClient(conn)
	req := &compactorv1.LowerRequest{
		Provider: compactorv1.Provider_PROVIDER_OPENAI_CHAT,
		Messages: []*compactorv1.Message{{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "anything"}}}}}},
	}
	for range 2 {
		got, err := c.Lower(ctx, req)
		if err != nil {
			t.Fatalf("Lower: %v", err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("Lower = %v, want %v", got, want)
		}
	}
	// The same response whatever the request: the floor does no work.
	got, err := c.Lower(ctx, &compactorv1.LowerRequest{Provider: compactorv1.Provider_PROVIDER_GEMINI})
	if err != nil || !proto.Equal(got, want) {
		t.Fatalf("Lower(other request) = %v, %v; want %v", got, err, want)
	}
	// Other methods are not served.
	if _, err := c.Plan(ctx, &compactorv1.PlanRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("Plan: %v, want Unimplemented", err)
	}
	// The health service is compactord's.
	hr, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: compactorv1.CompactorService_ServiceDesc.ServiceName})
	if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health: %v, %v; want SERVING", hr, err)
	}
	// So is the log line per call (method and code, no payload).
	if s := logs.String(); !strings.Contains(s, `"grpc.method":"Lower"`) || strings.Contains(s, "anything") {
		t.Errorf("log has no call line for Lower, or has the payload:\n%s", s)
	}
}

// The floor decodes requests with compactord's codec: a string that is not UTF-8 is
// INVALID_ARGUMENT naming the field, before the handler.
func TestDecodesLikeCompactord(t *testing.T) {
	conn, _ := start(t, compactorv1.CompactorService_Lower_FullMethodName, &compactorv1.LowerResponse{Body: "{}"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// LowerRequest.model (field 3), which the client's own codec would refuse to encode.
	req := rawRequest(protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), "m\xff"))
	err := conn.Invoke(ctx, compactorv1.CompactorService_Lower_FullMethodName, req, new(compactorv1.LowerResponse), grpc.ForceCodecV2(rawCodec{}))
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("Lower with invalid UTF-8: %v, want InvalidArgument", err)
	}
	var fields []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	if len(fields) != 1 || fields[0] != "model" {
		t.Errorf("violations name %v, want [model]", fields)
	}
}

func TestFlags(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.pb")
	if err := os.WriteFile(good, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.pb")
	if err := os.WriteFile(bad, []byte{0xff}, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "-method and -response are required"},
		{[]string{"-method", compactorv1.CompactorService_Plan_FullMethodName}, "-method and -response are required"},
		{[]string{"-method", "/grpc.health.v1.Health/Check", "-response", good}, "not a unary method"},
		{[]string{"-method", compactorv1.CompactorService_Plan_FullMethodName, "-response", bad}, "-response: *compactorv1.PlanResponse"},
		{[]string{"-method", compactorv1.CompactorService_Plan_FullMethodName, "-response", filepath.Join(dir, "missing")}, "no such file"},
	} {
		err := run(context.Background(), tc.args, &bytes.Buffer{}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	if err := run(context.Background(), []string{"-nope"}, &bytes.Buffer{}, nil); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("run(-nope) = %v, want a flag error", err)
	}
}

// rawRequest is an encoded request, sent as it is by rawCodec.
type rawRequest []byte

// rawCodec sends rawRequests and decodes responses with the protobuf runtime.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.(rawRequest))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// syncBuffer is a bytes.Buffer safe for the server's logger and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/internal/llmtest"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// llmConfig writes a --config file with an OpenAI-compatible summarizer "llm" pointed at
// llm, as the default.
func llmConfig(t *testing.T, llm *llmtest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "compactord.yaml")
	cfg := "default_summarizer: llm\nsummarizers:\n  - name: llm\n    kind: openai\n    base_url: " + llm.URL + "/v1\n    model: gpt-test\n    timeout: 30s\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func compactRequest() *compactorv1.CompactRequest {
	return &compactorv1.CompactRequest{
		Messages: irtest.Conversation(20),
		Policy:   &compactorv1.Policy{ContextWindow: 8000, Prune: &compactorv1.PrunePolicy{Disabled: true}},
	}
}

func TestBinaryDrainsInFlightCompactOnSIGTERM(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	arrived, release := llm.Hold()
	defer release()
	p := startBinary(t, nil, "--config", llmConfig(t, llm))
	client := compactorv1.NewCompactorServiceClient(p.dial(t))

	var (
		resp *compactorv1.CompactResponse
		err  error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		resp, err = client.Compact(t.Context(), compactRequest())
	}()
	select {
	case <-arrived: // the call is in flight, waiting for the summarizer
	case <-done:
		t.Fatalf("Compact returned before reaching the summarizer: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the summarizer request never arrived")
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); len(p.logged("draining")) == 0; {
		if time.Now().After(deadline) {
			t.Fatal(`no "draining" log line after SIGTERM`)
		}
		time.Sleep(10 * time.Millisecond)
	}
	release()
	<-done
	if err != nil {
		t.Fatalf("the in-flight Compact failed during the drain: %v", err)
	}
	if !resp.GetCompacted() || resp.GetSummary().GetSummarizer() != "llm" {
		t.Errorf("in-flight Compact: compacted %v by %q", resp.GetCompacted(), resp.GetSummary().GetSummarizer())
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("exit after draining: %v", err)
	}
	if len(p.logged("stopped")) != 1 {
		t.Error("the drain did not complete cleanly")
	}
}

// otlpReceiver is an OTLP/gRPC trace collector on loopback that keeps what it receives.
type otlpReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.ResourceSpans
}

func (r *otlpReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, req.GetResourceSpans()...)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func TestBinaryExportsSpansOverOTLP(t *testing.T) {
	recv := &otlpReceiver{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, recv)
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()

	llm := llmtest.NewOpenAI(t)
	p := startBinary(t, []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + lis.Addr().String(),
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_SERVICE_NAME=compactord-e2e",
	}, "--config", llmConfig(t, llm))
	resp, err := compactorv1.NewCompactorServiceClient(p.dial(t)).Compact(t.Context(), compactRequest())
	if err != nil || !resp.GetCompacted() {
		t.Fatalf("Compact: %v, %v", resp.GetCompacted(), err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil { // shutdown flushes the spans
		t.Fatal(err)
	}
	if err := p.wait(t); err != nil {
		t.Fatal(err)
	}

	recv.mu.Lock()
	defer recv.mu.Unlock()
	var server, chat *tracepb.Span
	serviceName := ""
	for _, rs := range recv.spans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				serviceName = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				switch s.GetName() {
				case "compactor.v1.CompactorService/Compact":
					server = s
				case "chat gpt-test":
					chat = s
				}
			}
		}
	}
	if serviceName != "compactord-e2e" {
		t.Errorf("service.name = %q, want OTEL_SERVICE_NAME", serviceName)
	}
	if server == nil || chat == nil {
		t.Fatalf("the collector got no server span or no summarization span (%d resource spans)", len(recv.spans))
	}
	if string(chat.GetParentSpanId()) != string(server.GetSpanId()) || string(chat.GetTraceId()) != string(server.GetTraceId()) {
		t.Error("the summarization span is not a child of the server span")
	}
	attrs := map[string]string{}
	for _, kv := range chat.GetAttributes() {
		attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	if attrs["gen_ai.operation.name"] != "chat" || attrs["gen_ai.provider.name"] != "openai" || attrs["compactor.prefix_hash"] != resp.GetPlan().GetPrefixHash() {
		t.Errorf("summarization span attributes: %v", attrs)
	}
}

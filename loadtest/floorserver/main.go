// Command floorserver is compactord's gRPC stack with no engine behind it: the load test's
// floor. It answers every call of one CompactorService method with the same response, read
// from a file, and does nothing else for it: no validation, no planning, lowering or
// summarizing. Everything around the handler is what compactord runs, built by the same
// constructor, service.NewGRPC: the codec, which decodes every request in full and checks its
// strings are UTF-8, the JSON log line per call, the metrics, panic recovery, the tracing
// stats handler with a no-op tracer as compactord has under the load test
// (OTEL_TRACES_EXPORTER=none), the health service.
//
// A scenario's RPS ratio against this server is what compactord would reach if its engine
// cost nothing: the cost of the call itself, moving and decoding the same request and
// sending the same response bytes.
//
//	floorserver -method /compactor.v1.CompactorService/Lower -response lower.pb
//
// It logs {"msg":"serving","addr":...} once it listens, and stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/metrics"
	"github.com/compactord/compactord/service"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/protobuf/proto"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "floorserver:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done. When ready is not nil, it receives the listening address.
func run(ctx context.Context, args []string, stderr io.Writer, ready chan<- string) error {
	fs := flag.NewFlagSet("floorserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "gRPC listen address")
	method := fs.String("method", "", "the full method answered, e.g. "+compactorv1.CompactorService_Lower_FullMethodName)
	respPath := fs.String("response", "", "file holding the binary protobuf response to every call of -method")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *method == "" || *respPath == "" {
		return errors.New("-method and -response are required")
	}
	b, err := os.ReadFile(*respPath)
	if err != nil {
		return err
	}
	fl, err := newFloor(*method, b)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m := metrics.New(prometheus.NewRegistry())
	g := service.NewGRPC(fl, service.GRPCOptions{
		Logger:         logger,
		TracerProvider: noop.NewTracerProvider(),
		Metrics:        m,
	})
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	logger.Info("serving", "addr", lis.Addr().String(), "method", *method)
	if ready != nil {
		ready <- lis.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(lis) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	g.Server.Stop()
	return nil
}

// floor answers one method with a fixed response; the others are UNIMPLEMENTED. The
// responses are only read, so every call may share them.
type floor struct {
	compactorv1.UnimplementedCompactorServiceServer
	plan    *compactorv1.PlanResponse
	compact *compactorv1.CompactResponse
	lower   *compactorv1.LowerResponse
	lift    *compactorv1.LiftResponse
}

// newFloor returns a floor answering method with the response encoded in b.
func newFloor(method string, b []byte) (*floor, error) {
	f := &floor{}
	var m proto.Message
	switch method {
	case compactorv1.CompactorService_Plan_FullMethodName:
		f.plan = new(compactorv1.PlanResponse)
		m = f.plan
	case compactorv1.CompactorService_Compact_FullMethodName:
		f.compact = new(compactorv1.CompactResponse)
		m = f.compact
	case compactorv1.CompactorService_Lower_FullMethodName:
		f.lower = new(compactorv1.LowerResponse)
		m = f.lower
	case compactorv1.CompactorService_Lift_FullMethodName:
		f.lift = new(compactorv1.LiftResponse)
		m = f.lift
	default:
		return nil, fmt.Errorf("-method %q: not a unary method of %s", method, compactorv1.CompactorService_ServiceDesc.ServiceName)
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("-response: %T: %w", m, err)
	}
	return f, nil
}

// Plan implements CompactorService.Plan.
func (f *floor) Plan(ctx context.Context, req *compactorv1.PlanRequest) (*compactorv1.PlanResponse, error) {
	if f.plan == nil {
		return f.UnimplementedCompactorServiceServer.Plan(ctx, req)
	}
	return f.plan, nil
}

// Compact implements CompactorService.Compact.
func (f *floor) Compact(ctx context.Context, req *compactorv1.CompactRequest) (*compactorv1.CompactResponse, error) {
	if f.compact == nil {
		return f.UnimplementedCompactorServiceServer.Compact(ctx, req)
	}
	return f.compact, nil
}

// Lower implements CompactorService.Lower.
func (f *floor) Lower(ctx context.Context, req *compactorv1.LowerRequest) (*compactorv1.LowerResponse, error) {
	if f.lower == nil {
		return f.UnimplementedCompactorServiceServer.Lower(ctx, req)
	}
	return f.lower, nil
}

// Lift implements CompactorService.Lift.
func (f *floor) Lift(ctx context.Context, req *compactorv1.LiftRequest) (*compactorv1.LiftResponse, error) {
	if f.lift == nil {
		return f.UnimplementedCompactorServiceServer.Lift(ctx, req)
	}
	return f.lift, nil
}

package service

import (
	"context"
	"log/slog"
	"net"
	"runtime"
	"runtime/debug"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/clip"
	"github.com/compactord/compactord/metrics"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// GRPCOptions configures the gRPC server around a Server.
type GRPCOptions struct {
	// Logger receives one line per call (method, code, duration; never payloads) and panic
	// reports. Nil discards them.
	Logger *slog.Logger
	// TracerProvider traces every call (otelgrpc); nil means the global provider.
	TracerProvider trace.TracerProvider
	// MaxMessageBytes is the largest request accepted; larger ones get RESOURCE_EXHAUSTED.
	// Zero means 16 MiB.
	MaxMessageBytes int
	// Metrics counts and times every call (grpc_server_*, first after call logging) and gets
	// a zero series for every registered method; nil records nothing.
	Metrics *metrics.Recorder
	// UnaryInterceptors and StreamInterceptors run in order after panic recovery, call
	// logging and metrics, so they are logged and counted (a panic among them included).
	// They may refuse a call. For a CompactorService call they run before its request is
	// received and decoded: the request they are given is the *rawRequest it will be
	// received into, not the decoded message (authentication and tenant limits need only
	// the call's metadata).
	UnaryInterceptors  []grpc.UnaryServerInterceptor
	StreamInterceptors []grpc.StreamServerInterceptor
	// Admit admits each CompactorService call once its request has arrived (a slot among
	// the calls in flight) and the memory its request takes (package limit's Shedder); nil
	// admits everything.
	Admit Admitter
	// NoReflection turns server reflection off (with authentication on, reflection needs
	// credentials like any other service; health never does).
	NoReflection bool
	// MaxConnectionAge closes client connections after this long (with a grace period for
	// their calls), so clients re-resolve and spread load over replicas added since they
	// connected (headless Service + round_robin on Kubernetes). Zero means forever.
	MaxConnectionAge time.Duration
	// ServerOptions are appended to the server's options.
	ServerOptions []grpc.ServerOption
}

// GRPC is a gRPC server serving CompactorService, grpc.health.v1 and server reflection.
type GRPC struct {
	// Server is the underlying gRPC server; register further services on it before Serve.
	Server *grpc.Server
	// Health is the health service; Shutdown sets it to NOT_SERVING.
	Health *health.Server
}

// NewGRPC returns a gRPC server for s with panic recovery (a panic becomes INTERNAL and the
// server keeps serving), structured call logging, metrics, OpenTelemetry tracing, the health
// service reporting SERVING for "" and "compactor.v1.CompactorService", and reflection.
// CompactorService requests are decoded within bounds (MaxDecodeDepth, DecodeCostMultiple)
// after the interceptors admitted the call; a request that is malformed or has a string
// field that is not UTF-8 fails with INVALID_ARGUMENT naming the field, one beyond a bound
// with RESOURCE_EXHAUSTED naming it.
//
// It is the one constructor of compactord's gRPC stack: cmd/compactord serves the engine
// with it, and loadtest/floorserver serves canned responses with it, so that the load test's
// floor measures exactly the stack compactord runs.
func NewGRPC(s compactorv1.CompactorServiceServer, o GRPCOptions) *GRPC {
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	maxBytes := o.MaxMessageBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxMessageBytes
	}
	admit := o.Admit
	if admit == nil {
		admit = admitAll{}
	}
	onPanic := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		method, _ := grpc.Method(ctx)
		logger.ErrorContext(ctx, "panic in handler", "grpc.method", method, "panic", p, "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})
	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall)}
	// Recovery comes first, so that a panic even in logging or metrics is an INTERNAL answer
	// rather than the end of the process; and again right after them, so that a panic in
	// any later interceptor (authentication, limits) or in a handler is logged and counted
	// as the INTERNAL it becomes.
	unary := []grpc.UnaryServerInterceptor{recovery.UnaryServerInterceptor(onPanic), logging.UnaryServerInterceptor(slogAdapter(logger), logOpts...)}
	stream := []grpc.StreamServerInterceptor{recovery.StreamServerInterceptor(onPanic), logging.StreamServerInterceptor(slogAdapter(logger), logOpts...)}
	if o.Metrics != nil {
		unary = append(unary, o.Metrics.UnaryServerInterceptor())
		stream = append(stream, o.Metrics.StreamServerInterceptor())
	}
	unary = append(append(unary, recovery.UnaryServerInterceptor(onPanic)), o.UnaryInterceptors...)
	stream = append(append(stream, recovery.StreamServerInterceptor(onPanic)), o.StreamInterceptors...)
	otelOpts := []otelgrpc.Option{otelgrpc.WithPropagators(propagation.TraceContext{})}
	if o.TracerProvider != nil {
		otelOpts = append(otelOpts, otelgrpc.WithTracerProvider(o.TracerProvider))
	}
	opts := append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxBytes),
		grpc.ForceServerCodecV2(newCodec(admit)),
		// Headers are a few hundred bytes (a JWT a few KiB): a bound keeps the memory of a
		// stream that sends headers and nothing else small. Larger header lists are refused
		// by the transport (RST_STREAM).
		grpc.MaxHeaderListSize(maxHeaderListBytes),
		// Streams beyond this on one connection are refused by the transport; clients queue
		// them. A replica does --max-inflight calls' work at once whatever the connections.
		grpc.MaxConcurrentStreams(maxStreamsPerConn),
		// Requests carry whole conversations (tens to hundreds of KiB): fixed windows this
		// large let a client send one without waiting for window updates, and spare the
		// server the update frames and the bandwidth-estimation pings of gRPC's dynamic
		// windows. At most InitialConnWindowSize bytes are buffered per connection.
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		// Calls run on reused goroutines, whose stacks have grown already: a new goroutine
		// per call grows its stack on every call, 4-5 µs of a health check's 40 (perf,
		// docs/PERFORMANCE.md). Idle workers cost only their stacks. When all are busy, a
		// call gets a goroutine of its own as before.
		grpc.NumStreamWorkers(uint32(streamWorkersPerCPU * runtime.GOMAXPROCS(0))),
		grpc.StatsHandler(otelgrpc.NewServerHandler(otelOpts...)),
		grpc.StatsHandler(callHolds{}),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	}, o.ServerOptions...)
	if o.MaxConnectionAge > 0 {
		opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionAge:      o.MaxConnectionAge,
			MaxConnectionAgeGrace: DrainTimeout,
		}))
	}
	srv := grpc.NewServer(opts...)
	srv.RegisterService(compactorService(requestDecoder{admit: admit}), s)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(compactorv1.CompactorService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	if !o.NoReflection {
		reflection.Register(srv)
	}
	o.Metrics.InitializeServer(srv)
	return &GRPC{Server: srv, Health: hs}
}

// Serve accepts connections on lis until Shutdown; see grpc.Server.Serve.
func (g *GRPC) Serve(lis net.Listener) error {
	return g.Server.Serve(lis)
}

// Shutdown drains the server: health turns NOT_SERVING (so load balancers and readiness
// probes stop sending traffic), new calls are refused, and in-flight calls run to completion
// until ctx is done, after which the remaining ones are cancelled. It reports whether all
// calls completed.
func (g *GRPC) Shutdown(ctx context.Context) bool {
	g.Health.Shutdown()
	done := make(chan struct{})
	go func() {
		g.Server.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		g.Server.Stop()
		<-done
		return false
	}
}

// slogAdapter lets the go-grpc-middleware logging interceptors write to slog, every string
// value bounded (package clip): an error message can quote a caller's input.
func slogAdapter(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		for i, f := range fields {
			if s, ok := f.(string); ok && len(s) > maxLogValue {
				fields[i] = clip.String(s, maxLogValue)
			}
		}
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}

// maxLogValue bounds a string value of a call's log line.
const maxLogValue = 2048

// Transport bounds per stream and per connection.
const (
	maxHeaderListBytes = 16 << 10
	maxStreamsPerConn  = 256
)

// Flow-control windows of the server's receiving side.
const (
	streamWindow = 1 << 20
	connWindow   = 4 << 20
)

// streamWorkersPerCPU sizes the server's pool of call goroutines. With 16 on two CPUs under
// the load test's 16 concurrent calls, stack growth fell from 4.8% to 0.2% of the server's
// time.
const streamWorkersPerCPU = 8

// DefaultMaxMessageBytes is the largest request NewGRPC accepts when GRPCOptions leaves
// MaxMessageBytes unset, and the default of compactord's and compactctl's
// --max-message-bytes.
const DefaultMaxMessageBytes = 16 << 20

// DrainTimeout is the time in-flight calls get to finish when their connection is closed:
// the grace period after MaxConnectionAge, and the default of compactord's --drain-timeout
// (Shutdown itself waits as long as its context allows).
const DrainTimeout = 20 * time.Second

package service

import (
	"context"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/hold"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// compactorService is CompactorService's description with method handlers of our own. The
// generated handlers receive and decode the request before the interceptors run, through
// the codec; these run the interceptors first (with the request not yet received: they see
// the *rawRequest it will be received into), then receive it, then decode it with d, so
// that:
//
//   - a caller the interceptors refuse (authentication, tenant limits) never has its
//     request read into memory or decoded;
//   - the call's slot among the calls in flight is taken once its request has arrived, so
//     a stream that never sends one holds none;
//   - every decoding error is answered as bad input.
//
// Each call holds what admitting it took (package hold) until gRPC has finished the call
// (callHolds) and its detached work has ended.
func compactorService(d requestDecoder) *grpc.ServiceDesc {
	handlers := map[string]grpc.MethodDesc{
		"Plan":    method(d, "Plan", compactorv1.CompactorServiceServer.Plan),
		"Compact": method(d, "Compact", compactorv1.CompactorServiceServer.Compact),
		"Lower":   method(d, "Lower", compactorv1.CompactorServiceServer.Lower),
		"Lift":    method(d, "Lift", compactorv1.CompactorServiceServer.Lift),
		"Expand":  method(d, "Expand", compactorv1.CompactorServiceServer.Expand),
	}
	sd := compactorv1.CompactorService_ServiceDesc
	sd.Methods = make([]grpc.MethodDesc, 0, len(sd.Methods))
	for _, m := range compactorv1.CompactorService_ServiceDesc.Methods {
		h, ok := handlers[m.MethodName]
		if !ok {
			panic("service: no handler for CompactorService." + m.MethodName)
		}
		sd.Methods = append(sd.Methods, h)
	}
	return &sd
}

// vtRequest is a pointer to a generated request type.
type vtRequest[T any] interface {
	*T
	vtMessage
}

// method is the handler of the unary method name, which call serves.
func method[Req any, P vtRequest[Req], Resp any](d requestDecoder, name string,
	call func(compactorv1.CompactorServiceServer, context.Context, P) (Resp, error)) grpc.MethodDesc {
	info := &grpc.UnaryServerInfo{FullMethod: compactorPrefix + name}
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			if !hold.Held(ctx) { // served without callHolds: the hold ends with the handler
				var end func()
				ctx, end = hold.Start(ctx)
				defer end()
			}
			raw := new(rawRequest)
			defer raw.drop(nil)
			handle := func(ctx context.Context, _ any) (any, error) {
				if err := dec(raw); err != nil {
					return nil, err
				}
				req := P(new(Req))
				if err := d.decode(ctx, raw, req); err != nil {
					return nil, err
				}
				return call(srv.(compactorv1.CompactorServiceServer), ctx, req)
			}
			if interceptor == nil {
				return handle(ctx, raw)
			}
			info := *info
			info.Server = srv
			return interceptor(ctx, raw, &info, handle)
		},
	}
}

// callHolds is the stats handler that gives each CompactorService call its hold (package
// hold) when gRPC starts the call, and ends it when gRPC has finished the call: after the
// handler returned, and after gRPC marshalled the response and wrote it and the status.
// The handler's return is too early: the response's strings point into the request's
// buffer (see codec), so the request's memory, and the call's slot and leases, are in use
// until the response has been marshalled.
type callHolds struct{}

// holdEnd keys the end of a call's hold in its context.
type holdEnd struct{}

// compactorPrefix starts the full method names of CompactorService.
var compactorPrefix = "/" + compactorv1.CompactorService_ServiceDesc.ServiceName + "/"

func (callHolds) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if !strings.HasPrefix(info.FullMethodName, compactorPrefix) {
		return ctx
	}
	ctx, end := hold.Start(ctx)
	return context.WithValue(ctx, holdEnd{}, end)
}

// HandleRPC ends the call's hold at stats.End, which gRPC reports once it has written the
// call's status, whatever the call's outcome.
func (callHolds) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.End); ok {
		if end, ok := ctx.Value(holdEnd{}).(func()); ok {
			end()
		}
	}
}

func (callHolds) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (callHolds) HandleConn(context.Context, stats.ConnStats)                       {}

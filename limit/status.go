package limit

import (
	"fmt"
	"time"

	"github.com/compactord/compactord/internal/clip"
	"github.com/compactord/compactord/internal/grpcerr"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
)

// refusal is the RESOURCE_EXHAUSTED answer of a per-tenant limit: a QuotaFailure naming the
// limit and the tenant, RetryInfo saying when to try again, and an ErrorInfo whose metadata
// names the limit for programs.
func refusal(limit, tenant string, retry time.Duration, desc string) error {
	msg := fmt.Sprintf("tenant %s is over its %s limit: %s", clip.Quote(tenant), limit, desc)
	return grpcerr.WithDetails(status.New(codes.ResourceExhausted, msg),
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject: "tenant:" + tenant, Description: limit + ": " + desc}}},
		grpcerr.RetryInfo(retry),
		grpcerr.ErrorInfo("TENANT_LIMIT_EXCEEDED", map[string]string{"limit": limit}))
}

// overloaded is the UNAVAILABLE answer of a full server: transient, and another replica (or
// this one, a moment later) may serve the call; RetryInfo says when.
func overloaded(bound string, retry time.Duration) error {
	return grpcerr.WithDetails(status.New(codes.Unavailable, "server overloaded: "+bound+" calls in flight already; retry later or on another replica"),
		grpcerr.RetryInfo(retry),
		grpcerr.ErrorInfo("OVERLOADED", map[string]string{"bound": bound}))
}

// memoryRefusal is the RESOURCE_EXHAUSTED answer of a full memory budget: with RetryInfo
// (retry > 0) while other requests hold it, without when the request alone is larger.
func memoryRefusal(n, budget int64, retry time.Duration) error {
	msg := fmt.Sprintf("the server's memory budget (%d bytes) cannot take this request's %d bytes now; retry later or on another replica", budget, n)
	details := []protoadapt.MessageV1{
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject: "server", Description: fmt.Sprintf("%s: %d bytes", MemoryBudget, budget)}}},
		grpcerr.ErrorInfo("MEMORY_BUDGET_EXCEEDED", map[string]string{"limit": MemoryBudget}),
	}
	if retry > 0 {
		details = append(details, grpcerr.RetryInfo(retry))
	} else {
		msg = fmt.Sprintf("the request needs %d bytes to decode, more than the server's whole memory budget (%d bytes)", n, budget)
	}
	return grpcerr.WithDetails(status.New(codes.ResourceExhausted, msg), details...)
}

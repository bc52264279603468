package limit

import (
	"fmt"
	"time"

	"github.com/compactord/compactord/internal/grpcerr"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// refusal is the RESOURCE_EXHAUSTED answer of a per-tenant limit: a QuotaFailure naming the
// limit and the tenant, RetryInfo saying when to try again, and an ErrorInfo whose metadata
// names the limit for programs.
func refusal(limit, tenant string, retry time.Duration, desc string) error {
	msg := fmt.Sprintf("tenant %q is over its %s limit: %s", tenant, limit, desc)
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

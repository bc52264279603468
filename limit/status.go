package limit

import (
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

const errorDomain = "compactord"

// refusal is the RESOURCE_EXHAUSTED answer of a per-tenant limit: a QuotaFailure naming the
// limit and the tenant, RetryInfo saying when to try again, and an ErrorInfo whose metadata
// names the limit for programs.
func refusal(limit, tenant string, retry time.Duration, desc string) error {
	msg := fmt.Sprintf("tenant %q is over its %s limit: %s", tenant, limit, desc)
	return withDetails(status.New(codes.ResourceExhausted, msg),
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject: "tenant:" + tenant, Description: limit + ": " + desc}}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)},
		&errdetails.ErrorInfo{Reason: "TENANT_LIMIT_EXCEEDED", Domain: errorDomain, Metadata: map[string]string{"limit": limit}})
}

// overloaded is the UNAVAILABLE answer of a full server: transient, and another replica (or
// this one, a moment later) may serve the call; RetryInfo says when.
func overloaded(bound string, retry time.Duration) error {
	return withDetails(status.New(codes.Unavailable, "server overloaded: "+bound+" calls in flight already; retry later or on another replica"),
		&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)},
		&errdetails.ErrorInfo{Reason: "OVERLOADED", Domain: errorDomain, Metadata: map[string]string{"bound": bound}})
}

// withDetails attaches details to st; if that fails the status goes out without them.
func withDetails(st *status.Status, details ...protoadapt.MessageV1) error {
	if d, err := st.WithDetails(details...); err == nil {
		return d.Err()
	}
	return st.Err()
}

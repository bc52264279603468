// Package grpcerr builds the status errors compactord answers with: a gRPC status and its
// google.rpc details, every ErrorInfo in one domain. It is the one home of what the service's
// error mapping (service.toStatus) and the admission refusals (package limit) share.
package grpcerr

import (
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Domain is the ErrorInfo domain of compactord's errors.
const Domain = "compactord"

// WithDetails attaches details to st and returns it as an error; if they cannot be attached,
// the status goes out without them.
func WithDetails(st *status.Status, details ...protoadapt.MessageV1) error {
	if d, err := st.WithDetails(details...); err == nil {
		return d.Err()
	}
	return st.Err()
}

// ErrorInfo is an ErrorInfo of Domain with the given reason and metadata (nil for none).
func ErrorInfo(reason string, metadata map[string]string) *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: metadata}
}

// RetryInfo tells the caller to retry after d.
func RetryInfo(d time.Duration) *errdetails.RetryInfo {
	return &errdetails.RetryInfo{RetryDelay: durationpb.New(d)}
}

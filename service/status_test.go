package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/summarize"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestToStatus(t *testing.T) {
	tests := []struct {
		err  error
		want codes.Code
	}{
		{engine.Invalid("policy.trigger_ratio", "out of range"), codes.InvalidArgument},
		{fmt.Errorf("lift: %w", engine.Invalid("body", "not JSON")), codes.InvalidArgument},
		{&engine.ValidationError{Limit: true, Violations: []engine.FieldViolation{{Field: "messages", Description: "too many"}}}, codes.ResourceExhausted},
		{fmt.Errorf("plan: %w: floor exceeds window by 10 tokens", engine.ErrIrreducible), codes.FailedPrecondition},
		{fmt.Errorf("summarize: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
		{status.Error(codes.NotFound, "no such summarizer"), codes.NotFound},
		{fmt.Errorf("compact: %w", summarize.ErrCircuitOpen), codes.Unavailable},
		{fmt.Errorf("compact: %w", summarize.ErrEmptySummary), codes.Unavailable},
		{fmt.Errorf("compact: %w: %w", summarize.ErrRejected, &summarize.ProviderError{Status: 401}), codes.FailedPrecondition},
		{fmt.Errorf("summarizer llm: %w: %w", summarize.ErrUnavailable, context.DeadlineExceeded), codes.DeadlineExceeded},
		{errors.New("boom"), codes.Internal},
	}
	for _, tt := range tests {
		if got := status.Code(toStatus(tt.err)); got != tt.want {
			t.Errorf("toStatus(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
	if toStatus(nil) != nil {
		t.Error("toStatus(nil) != nil")
	}
}

// TestStatusSaysItOnce: an error wrapping a validation error (the registry's ErrUnknown around
// field "summarizer") reads as its violations, once, not as the wrapper's words and then the
// violation's same words again.
func TestStatusSaysItOnce(t *testing.T) {
	r, err := summarize.NewRegistry(nil, "", summarize.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Get("gpt")
	st := status.Convert(toStatus(err))
	const want = `summarizer: unknown summarizer "gpt" (configured: extractive)`
	if st.Code() != codes.InvalidArgument || st.Message() != want {
		t.Errorf("unknown summarizer: %v %q, want %v %q", st.Code(), st.Message(), codes.InvalidArgument, want)
	}
}

// Strings from requests are cut in the status a caller gets (and the call log prints), with
// their length: a 1 MiB message id makes a status of about a kilobyte.
func TestToStatusBoundsCallerStrings(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	err := toStatus(&engine.ValidationError{Violations: []engine.FieldViolation{
		{Field: "messages[1].id", Description: fmt.Sprintf("duplicate message id %q (first at messages[0])", huge)},
		{Field: "messages[2].id", Description: fmt.Sprintf("duplicate message id %q (first at messages[0])", huge)},
	}})
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || len(st.Message()) > maxStatusMessage+64 || !strings.Contains(st.Message(), "bytes)") {
		t.Errorf("status message of %d bytes, want at most about %d, with the length", len(st.Message()), maxStatusMessage)
	}
	for _, d := range st.Details() {
		for _, v := range d.(*errdetails.BadRequest).GetFieldViolations() {
			if len(v.GetDescription()) > maxViolationDescribe+64 || v.GetField() == "" {
				t.Errorf("violation %s: a %d-byte description", v.GetField(), len(v.GetDescription()))
			}
		}
	}
	if msg := status.Convert(toStatus(errors.New(huge))).Message(); len(msg) > maxStatusMessage+64 {
		t.Errorf("an internal error's message of %d bytes", len(msg))
	}
}

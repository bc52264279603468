package service

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/summarize"
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

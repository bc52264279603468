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

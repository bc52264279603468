package service

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/compactord/compactord/engine"
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

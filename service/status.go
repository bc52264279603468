package service

import (
	"context"
	"errors"

	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/internal/grpcerr"
	"github.com/compactord/compactord/summarize"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// toStatus maps an error from the engine, the cache or a summarizer to the gRPC status a
// client sees. It is the one place where Go errors become gRPC codes.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		return gs.GRPCStatus().Err()
	}
	var ve *engine.ValidationError
	var se *format.StrictError
	switch {
	case errors.As(err, &se):
		pf := &errdetails.PreconditionFailure{}
		for i, f := range se.Fields() {
			pf.Violations = append(pf.Violations, &errdetails.PreconditionFailure_Violation{
				Type: "LOSSY_LOWERING", Subject: f, Description: se.Warnings[i]})
		}
		return grpcerr.WithDetails(status.New(codes.FailedPrecondition, err.Error()), pf)
	case errors.As(err, &ve):
		code := codes.InvalidArgument
		if ve.Limit {
			code = codes.ResourceExhausted
		}
		br := &errdetails.BadRequest{FieldViolations: make([]*errdetails.BadRequest_FieldViolation, len(ve.Violations))}
		for i, v := range ve.Violations {
			br.FieldViolations[i] = &errdetails.BadRequest_FieldViolation{Field: v.Field, Description: v.Description}
		}
		return grpcerr.WithDetails(status.New(code, err.Error()), br)
	case errors.Is(err, engine.ErrIrreducible):
		return grpcerr.WithDetails(status.New(codes.FailedPrecondition, err.Error()),
			grpcerr.ErrorInfo("CONTEXT_IRREDUCIBLE", nil))
	case errors.Is(err, engine.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, engine.ErrTooLarge):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, summarize.ErrUnavailable), errors.Is(err, summarize.ErrEmptySummary):
		return grpcerr.WithDetails(status.New(codes.Unavailable, err.Error()),
			grpcerr.ErrorInfo("SUMMARIZER_FAILED", nil), grpcerr.RetryInfo(summarize.RetryDelay(err)))
	}
	return status.Error(codes.Internal, err.Error())
}

package service

import (
	"context"
	"errors"
	"strconv"

	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/internal/clip"
	"github.com/compactord/compactord/internal/grpcerr"
	"github.com/compactord/compactord/summarize"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Bounds of what an error tells its caller (and the call log): a status message, and each
// field violation's description. The strings in them come from requests (ids, names) and
// are cut with their length (package clip).
const (
	maxStatusMessage     = 1024
	maxViolationDescribe = 2 * clip.Max
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
	msg := clip.String(err.Error(), maxStatusMessage)
	var ve *engine.ValidationError
	var se *format.StrictError
	var pe *summarize.ProviderError
	switch {
	case errors.As(err, &se):
		pf := &errdetails.PreconditionFailure{}
		for i, f := range se.Fields() {
			pf.Violations = append(pf.Violations, &errdetails.PreconditionFailure_Violation{
				Type: "LOSSY_LOWERING", Subject: clip.String(f, maxViolationDescribe), Description: clip.String(se.Warnings[i], maxViolationDescribe)})
		}
		return grpcerr.WithDetails(status.New(codes.FailedPrecondition, msg), pf)
	case errors.As(err, &ve):
		code := codes.InvalidArgument
		if ve.Limit {
			code = codes.ResourceExhausted
		}
		br := &errdetails.BadRequest{FieldViolations: make([]*errdetails.BadRequest_FieldViolation, len(ve.Violations))}
		for i, v := range ve.Violations {
			br.FieldViolations[i] = &errdetails.BadRequest_FieldViolation{Field: clip.String(v.Field, maxViolationDescribe),
				Description: clip.String(v.Description, maxViolationDescribe)}
		}
		// The violations are the message: the errors wrapping them (summarize.ErrUnknown
		// around field "summarizer", say) would only repeat what they say.
		return grpcerr.WithDetails(status.New(code, clip.String(ve.Error(), maxStatusMessage)), br)
	case errors.Is(err, engine.ErrIrreducible):
		var meta map[string]string
		var ie *engine.IrreducibleError
		if errors.As(err, &ie) {
			meta = map[string]string{"floor_tokens": strconv.FormatInt(ie.Floor, 10),
				"usable_tokens": strconv.FormatInt(ie.Usable, 10), "never_cut": strconv.FormatBool(ie.NeverCut)}
			if ie.NeverCut {
				meta["head_tokens"] = strconv.FormatInt(ie.Head, 10)
				meta["instruction_tokens"] = strconv.FormatInt(ie.Instructions, 10)
				meta["newest_request_tokens"] = strconv.FormatInt(ie.NewestRequest, 10)
			}
		}
		return grpcerr.WithDetails(status.New(codes.FailedPrecondition, msg), grpcerr.ErrorInfo("CONTEXT_IRREDUCIBLE", meta))
	case errors.Is(err, engine.ErrInvalid):
		return status.Error(codes.InvalidArgument, msg)
	case errors.Is(err, engine.ErrTooLarge):
		return status.Error(codes.ResourceExhausted, msg)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, msg)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, msg)
	case errors.Is(err, summarize.ErrRejected):
		// The provider refused the request for good (400, 401, 403, 404, 422): a retry
		// meets the same answer, so no RetryInfo, and not UNAVAILABLE.
		meta := map[string]string{}
		if errors.As(err, &pe) {
			meta["status"] = strconv.Itoa(pe.Status)
		}
		return grpcerr.WithDetails(status.New(codes.FailedPrecondition, msg), grpcerr.ErrorInfo("SUMMARIZER_REJECTED", meta))
	case errors.Is(err, summarize.ErrUnavailable), errors.Is(err, summarize.ErrEmptySummary):
		return grpcerr.WithDetails(status.New(codes.Unavailable, msg),
			grpcerr.ErrorInfo("SUMMARIZER_FAILED", nil), grpcerr.RetryInfo(summarize.RetryDelay(err)))
	}
	return status.Error(codes.Internal, msg)
}

// Irreducible reports whether err is a status toStatus made of an engine.IrreducibleError
// (FAILED_PRECONDITION, CONTEXT_IRREDUCIBLE), and whether its floor is what no compaction
// cuts: the head and the user's newest request alone.
func Irreducible(err error) (is, neverCut bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return false, false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "CONTEXT_IRREDUCIBLE" {
			return true, info.GetMetadata()["never_cut"] == "true"
		}
	}
	return false, false
}

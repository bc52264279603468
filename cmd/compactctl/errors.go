package main

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// usageError is a flag value that cannot be used: a file that cannot be read, a bad policy.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// inputError is an input that cannot be read as a conversation before any call.
type inputError struct{ err error }

func (e inputError) Error() string { return e.err.Error() }
func (e inputError) Unwrap() error { return e.err }

// exitCodes maps the gRPC codes a script may branch on to exit statuses; see the package doc.
var exitCodes = map[codes.Code]int{
	codes.InvalidArgument:    exitInvalid,
	codes.FailedPrecondition: exitUnfit,
	codes.ResourceExhausted:  exitUnfit,
	codes.Unavailable:        exitUnavailable,
	codes.DeadlineExceeded:   exitUnavailable,
	codes.Unauthenticated:    exitDenied,
	codes.PermissionDenied:   exitDenied,
}

// report prints err on w and returns its exit status.
func report(w io.Writer, err error) int {
	var ue usageError
	var ie inputError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(w, "compactctl: %v\n", err)
		return exitUsage
	case errors.As(err, &ie):
		fmt.Fprintf(w, "compactctl: %v\n", err)
		return exitInvalid
	}
	st, ok := status.FromError(err)
	if !ok {
		fmt.Fprintf(w, "compactctl: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(w, "compactctl: %s: %s\n", codeName(st.Code()), st.Message())
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.BadRequest:
			for _, v := range d.FieldViolations {
				if line := v.Field + ": " + v.Description; line != st.Message() {
					fmt.Fprintf(w, "  %s\n", line)
				}
			}
		case *errdetails.QuotaFailure:
			for _, v := range d.Violations {
				fmt.Fprintf(w, "  quota %s: %s\n", v.Subject, v.Description)
			}
		case *errdetails.RetryInfo:
			fmt.Fprintf(w, "  retry after %s\n", d.RetryDelay.AsDuration())
		}
	}
	if code, ok := exitCodes[st.Code()]; ok {
		return code
	}
	return exitFailure
}

// codeName is the code as gRPC's documentation spells it: INVALID_ARGUMENT, not
// InvalidArgument.
func codeName(c codes.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return c.String()
}

var codeNames = [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/compactord/compactord/internal/bytesize"
	"github.com/compactord/compactord/service"

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

// exitCodes maps the gRPC codes a script may branch on to exit statuses; -h lists them
// (exitCodesHelp).
var exitCodes = map[codes.Code]int{
	codes.InvalidArgument:    exitInvalid,
	codes.FailedPrecondition: exitUnfit,
	codes.ResourceExhausted:  exitUnfit,
	codes.Unavailable:        exitUnavailable,
	codes.DeadlineExceeded:   exitUnavailable,
	codes.Unauthenticated:    exitDenied,
	codes.PermissionDenied:   exitDenied,
}

// report prints err on standard error and returns its exit status.
func (c *command) report(err error) int {
	w := c.stderr
	var (
		ue usageError
		ie inputError
		ce configError
		tl tooLarge
	)
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(w, "compactctl: %v\n", err)
		return exitUsage
	case errors.As(err, &tl): // before inputError, which may wrap it
		fmt.Fprintf(w, "compactctl: %v\n", err)
		return exitUnfit
	case errors.As(err, &ie):
		fmt.Fprintf(w, "compactctl: %v\n", err)
		return exitInvalid
	case errors.As(err, &ce):
		fmt.Fprintf(w, "compactctl: cannot reach the server: %v\n  %s\n", ce.err, ce.hint)
		return exitConfig
	}
	st, ok := status.FromError(err)
	if !ok {
		fmt.Fprintf(w, "compactctl: %v\n", err)
		return exitFailure
	}
	var violations, lossy []string
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.BadRequest:
			for _, v := range d.FieldViolations {
				violations = append(violations, c.inInput(v.Field)+": "+c.inFlags(v.Description))
			}
		case *errdetails.PreconditionFailure:
			for _, v := range d.Violations {
				lossy = append(lossy, v.Description)
			}
		}
	}
	msg := st.Message()
	if len(violations) == 1 {
		msg = violations[0] // the message, with the field where the user wrote it
	}
	// A strict Lower's message lists what it would lose: one line each, below it.
	head, listed := strings.CutSuffix(msg, strings.Join(lossy, "; "))
	if listed = listed && len(lossy) > 0; listed {
		msg = strings.TrimSpace(head)
	}
	fmt.Fprintf(w, "compactctl: %s: %s\n", codeName(st.Code()), c.inFlags(msg))
	if st.Code() == codes.ResourceExhausted && strings.HasPrefix(msg, "grpc: received message larger than max") {
		fmt.Fprintf(w, "  the server's request limit (compactord --max-message-bytes; default %s)\n", bytesize.Size(service.DefaultMaxMessageBytes))
	}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.BadRequest:
			for _, line := range violations {
				if line != msg {
					fmt.Fprintf(w, "  %s\n", line)
				}
			}
		case *errdetails.PreconditionFailure:
			for _, line := range lossy {
				if listed {
					fmt.Fprintf(w, "  %s\n", c.inFlags(line))
				}
			}
		case *errdetails.ErrorInfo:
			if d.GetReason() == "CONTEXT_IRREDUCIBLE" && c.fit != "" {
				fmt.Fprintf(w, "  %s\n", c.fit)
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

// inInput names a field of the request by where the user wrote it: the body of a Lift is
// the input file ("body.messages[2]" is "conversation.json: messages[2]"), and so are the
// messages of an IR document read from it; a field a flag sets is that flag (flagName).
func (c *command) inInput(field string) string {
	switch {
	case field == "body":
		return c.inputName()
	case strings.HasPrefix(field, "body."):
		return c.inputName() + ": " + strings.TrimPrefix(field, "body.")
	case c.inputIsIR && (field == "messages" || strings.HasPrefix(field, "messages[")):
		return c.inputName() + ": " + field
	}
	return c.flagName(field)
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

// Package engine holds compactord's pure algorithms over the IR: validation, and a plan in
// its three steps: measuring a conversation (token counts through package tokenizer,
// memoized by content in a Counter; regions and turns; what pruning saves: measure.go,
// costs.go), deciding what to do about it (prune, cut, summarize: decide.go) and writing the
// response (response.go); the prefix hash chain, pruning and cutting, and the summary text.
// It does no I/O and keeps no global mutable state; every function is safe for concurrent use
// unless its doc says otherwise.
package engine

import (
	"errors"
	"strings"
)

// Sentinel errors. The service maps them to gRPC codes in one place; everything the engine
// returns for bad input or an impossible request wraps one of them.
var (
	// ErrInvalid marks input that breaks a rule of the IR or the policy (INVALID_ARGUMENT).
	ErrInvalid = errors.New("invalid argument")
	// ErrIrreducible marks a conversation that cannot fit its window whatever is done
	// (FAILED_PRECONDITION).
	ErrIrreducible = errors.New("irreducible")
	// ErrTooLarge marks input above a configured size limit (RESOURCE_EXHAUSTED).
	ErrTooLarge = errors.New("too large")
)

// FieldViolation names one offending field by its path in the request
// ("messages[3].parts[1].tool_result.tool_call_id") and says what is wrong with it.
type FieldViolation struct {
	Field       string
	Description string
}

// ValidationError lists every field violation found in a request. It wraps ErrInvalid, or
// ErrTooLarge when Limit is set.
type ValidationError struct {
	Violations []FieldViolation
	// Limit marks violations of size limits rather than of structure.
	Limit bool
}

// Error joins the violations as "field: description; field: description".
func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, v := range e.Violations {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(v.Field)
		b.WriteString(": ")
		b.WriteString(v.Description)
	}
	return b.String()
}

// Unwrap returns ErrTooLarge for limit violations and ErrInvalid otherwise.
func (e *ValidationError) Unwrap() error {
	if e.Limit {
		return ErrTooLarge
	}
	return ErrInvalid
}

// Invalid returns a ValidationError with a single violation.
func Invalid(field, description string) *ValidationError {
	return &ValidationError{Violations: []FieldViolation{{Field: field, Description: description}}}
}

// TooLarge returns a ValidationError with a single violation of a size limit (it wraps
// ErrTooLarge: RESOURCE_EXHAUSTED).
func TooLarge(field, description string) *ValidationError {
	return &ValidationError{Limit: true, Violations: []FieldViolation{{Field: field, Description: description}}}
}

// IrreducibleError says by how much the smallest possible compaction of a conversation
// exceeds its usable window. It wraps ErrIrreducible (FAILED_PRECONDITION).
type IrreducibleError struct {
	// Floor is the least the conversation can be compacted to, in tokens: the head, the
	// user's newest request, the least summary room and the newest turn with its tool
	// outputs cut, or, when that costs more, the whole conversation pruned and cut.
	Floor int64
	// Usable is context_window − reserve_output_tokens.
	Usable int64
	// Excess is Floor − Usable (> 0).
	Excess int64
	// NeverCut is set when the floor is what no compaction cuts: the head (its standing
	// instructions included) and the user's newest request alone.
	NeverCut bool
	// Head, Instructions and NewestRequest are, when NeverCut, the terms of the floor: the
	// head (system prompt, prefaces, pinned messages and standing instructions), the share of
	// it that is standing instructions, and the user's newest request.
	Head, Instructions, NewestRequest int64
	msg                               string
}

// Error says what the floor is made of and by how many tokens it exceeds the window.
func (e *IrreducibleError) Error() string { return e.msg }

// Unwrap returns ErrIrreducible.
func (e *IrreducibleError) Unwrap() error { return ErrIrreducible }

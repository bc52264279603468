package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// fitHint is the line an irreducible error (FAILED_PRECONDITION, CONTEXT_IRREDUCIBLE) of the
// plan req adds below its message: the smallest context window (or, without one, the
// smallest --trigger-tokens) the conversation fits, or "" when err is another error.
//
// It is computed from the least the conversation can be compacted to, the floor_tokens the
// error carries, and the policy's reply reserve. When the floor is only what no compaction
// cuts (never_cut: the head and the user's newest request), the server measured nothing else:
// one more plan at the window that floor needs measures the rest.
func (c *command) fitHint(ctx context.Context, req *compactorv1.PlanRequest, err error) string {
	floor, neverCut, ok := irreducibleFloor(err)
	if !ok {
		return ""
	}
	policy := proto.Clone(req.GetPolicy()).(*compactorv1.Policy)
	byTrigger := policy.GetContextWindow() == 0 // then trigger_tokens is the usable window
	limit := func(floor int64) int64 {
		if byTrigger {
			return floor
		}
		return smallestWindow(floor, policy.GetReserveOutputTokens())
	}
	if neverCut {
		if byTrigger {
			policy.TriggerTokens = limit(floor)
		} else {
			policy.ContextWindow = limit(floor)
		}
		_, err := c.backend.Plan(ctx, &compactorv1.PlanRequest{Messages: req.GetMessages(), Policy: policy})
		if err != nil {
			if floor, _, ok = irreducibleFloor(err); !ok {
				return ""
			}
		}
	}
	least := limit(floor)
	if byTrigger {
		return fmt.Sprintf("it fits --trigger-tokens %d or more (the usable window, without --context-window)", least)
	}
	return fmt.Sprintf("it fits a context window of %s tokens or more: --context-window %d (%s for the conversation at its least + %s reserved for the reply)",
		thousands(least), least, thousands(floor), thousands(least-floor))
}

// irreducibleFloor reads the floor_tokens and never_cut of an irreducible error (ErrorInfo
// CONTEXT_IRREDUCIBLE, service/status.go); ok is false for any other error.
func irreducibleFloor(err error) (floor int64, neverCut, ok bool) {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, is := d.(*errdetails.ErrorInfo); is && info.GetReason() == "CONTEXT_IRREDUCIBLE" {
			floor, err := strconv.ParseInt(info.GetMetadata()["floor_tokens"], 10, 64)
			return floor, info.GetMetadata()["never_cut"] == "true", err == nil
		}
	}
	return 0, false, false
}

// defaultReserveDivisor is the engine's default reply reserve, a tenth of the window (up to
// engine.DefaultMaxReserve; engine/policy.go), as a divisor.
const defaultReserveDivisor = 10

// smallestWindow is the least context window whose usable part (the window less the reply
// reserve) holds floor tokens: with the reserve the policy set (reserve > 0), else with the
// engine's default one, which grows with the window.
func smallestWindow(floor, reserve int64) int64 {
	if reserve > 0 {
		return floor + reserve
	}
	usable := func(w int64) int64 { return w - min(engine.DefaultMaxReserve, w/defaultReserveDivisor) }
	// usable grows by 0 or 1 with each token of window, and floor + DefaultMaxReserve is
	// always enough.
	extra := sort.Search(engine.DefaultMaxReserve+1, func(n int) bool { return usable(floor+int64(n)) >= floor })
	return floor + int64(extra)
}

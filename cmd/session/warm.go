package main

import (
	"context"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/measure"
)

// What fills the cache before a warm replay (issue 37): other calls of the same tenant on the
// same conversation.
const (
	// fillForcedRatio is the context window, as a share of the session's tokens, of the forced
	// compactions: a host that forced a compaction earlier.
	fillForcedRatio = 0.5
	// fillReplayRatio is the context window of the replay that runs first: the same session
	// at a smaller window (a retry with a smaller model).
	fillReplayRatio = 0.25
	// fillSmallRoom is the summary room (policy.summary_max_tokens) of the forced compactions
	// repeated with a smaller room: a host that asked for a short summary.
	fillSmallRoom = 300
	// fillInstructions are the instructions of the forced compactions repeated with them.
	fillInstructions = "Keep every file path and the failing test names."
)

// fillPoints are where the forced compactions cut the conversation: before the assistant
// message nearest each share of its messages.
var fillPoints = []float64{0.25, 0.5, 0.75, 1}

// fill fills h's cache with summaries of s written by other calls: forced compactions of
// prefixes of s (fillPoints) at fillForcedRatio of its tokens, each also with a summary room of
// fillSmallRoom (where the window allows it) and with fillInstructions, then a replay of s at
// fillReplayRatio, in that order. It returns how many calls it made and how many failed.
func (h host) fill(ctx context.Context, s *session) (calls, failed int) {
	window := max(minWindow, int64(fillForcedRatio*float64(s.tokens)))
	variants := []*compactorv1.CompactRequest{
		{Policy: &compactorv1.Policy{ContextWindow: window}},
		{Policy: &compactorv1.Policy{ContextWindow: window, SummaryMaxTokens: fillSmallRoom}},
		{Policy: &compactorv1.Policy{ContextWindow: window}, Instructions: fillInstructions},
	}
	done := map[int]bool{}
	for _, share := range fillPoints {
		end := measure.AssistantNear(s.msgs, share)
		if end <= 0 || done[end] {
			continue
		}
		done[end] = true
		for _, v := range variants {
			calls++
			req := &compactorv1.CompactRequest{Messages: s.msgs[:end], Policy: v.GetPolicy(), Force: true, Summarizer: h.summarizer, Instructions: v.GetInstructions()}
			if _, err := h.srv.Compact(ctx, req); err != nil {
				failed++
			}
		}
	}
	tr := h.replay(ctx, s, s.window(fillReplayRatio))
	return calls + tr.calls, failed + len(tr.failures)
}

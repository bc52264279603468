package service

import (
	"fmt"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/summary"
	"go.opentelemetry.io/otel/attribute"
)

// Span attributes of the summary check (counts only, never content).
const (
	attrCheckRequestsTotal    = attribute.Key("compactor.check.requests.total")
	attrCheckRequestsRetained = attribute.Key("compactor.check.requests.retained")
	attrCheckRequestsAppended = attribute.Key("compactor.check.requests.appended")
	attrCheckPathsTotal       = attribute.Key("compactor.check.paths.total")
	attrCheckPathsRetained    = attribute.Key("compactor.check.paths.retained")
	attrCheckPathsAppended    = attribute.Key("compactor.check.paths.appended")
	attrCheckTrimmed          = attribute.Key("compactor.check.trimmed")
	attrCheckRequestsDropped  = attribute.Key("compactor.check.requests.dropped")
)

// summaryProto is the API's Summary of e, served with keptVerbatim requests kept verbatim
// after it; fallbackFrom names the summarizer whose fallback wrote it ("" for none).
func summaryProto(e *cache.Entry, keptVerbatim int, fallbackFrom string) *compactorv1.Summary {
	return &compactorv1.Summary{
		Text:                     e.Text,
		Summarizer:               e.Summarizer,
		Model:                    e.Model,
		PromptVersion:            e.PromptVersion,
		InputTokens:              e.InputTokens,
		OutputTokens:             e.OutputTokens,
		CoveredMessages:          e.CoveredMessages,
		RequestsTotal:            int32(e.Check.RequestsTotal),
		RequestsRetained:         int32(e.Check.RequestsRetained),
		RequestsAppended:         int32(e.Check.RequestsAppended),
		PathsTotal:               int32(e.Check.PathsTotal),
		PathsRetained:            int32(e.Check.PathsRetained),
		PathsAppended:            int32(e.Check.PathsAppended),
		CheckTrimmed:             e.Check.Trimmed,
		RequestsKeptVerbatim:     int32(keptVerbatim),
		FallbackFrom:             fallbackFrom,
		RequestsDropped:          int32s(e.Check.RequestsDropped),
		CacheReadInputTokens:     e.CacheReadTokens,
		CacheCreationInputTokens: e.CacheWriteTokens,
		EstimatedCost:            e.Cost,
	}
}

// checkAttributes are the span attributes of a summary check.
func checkAttributes(c summary.Check) []attribute.KeyValue {
	return []attribute.KeyValue{
		attrCheckRequestsTotal.Int(c.RequestsTotal), attrCheckRequestsRetained.Int(c.RequestsRetained),
		attrCheckRequestsAppended.Int(c.RequestsAppended), attrCheckPathsTotal.Int(c.PathsTotal),
		attrCheckPathsRetained.Int(c.PathsRetained), attrCheckPathsAppended.Int(c.PathsAppended),
		attrCheckTrimmed.Bool(c.Trimmed), attrCheckRequestsDropped.Int(len(c.RequestsDropped)),
	}
}

// cacheStatusProto is the API's CacheStatus of a cache outcome.
func cacheStatusProto(s cache.Status) compactorv1.CacheStatus {
	switch s {
	case cache.StatusHit:
		return compactorv1.CacheStatus_CACHE_STATUS_HIT
	case cache.StatusMiss:
		return compactorv1.CacheStatus_CACHE_STATUS_MISS
	case cache.StatusUnavailable:
		return compactorv1.CacheStatus_CACHE_STATUS_UNAVAILABLE
	case cache.StatusBypass:
		return compactorv1.CacheStatus_CACHE_STATUS_BYPASS
	}
	return compactorv1.CacheStatus_CACHE_STATUS_UNSPECIFIED
}

func int32s(ns []int) []int32 {
	var out []int32
	for _, n := range ns {
		out = append(out, int32(n))
	}
	return out
}

// droppedWarnings are the response's warnings for the requests a summary dropped: one per
// request, naming the message it came from.
func droppedWarnings(c summary.Check) []string {
	var out []string
	for i, n := range c.RequestsDropped {
		if i < len(c.DroppedMessages) {
			out = append(out, fmt.Sprintf("messages[%d]: request %d did not fit the summary room and was folded whole (Summary.requests_dropped)",
				c.DroppedMessages[i], n))
		}
	}
	return out
}

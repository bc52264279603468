package service_test

import (
	"fmt"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/service"
	"github.com/compactord/compactord/summarize"
)

func TestZZDebug(t *testing.T) {
	reg, _ := summarize.NewRegistry(nil, "", summarize.Options{})
	for _, s := range sessions(t, 1) {
		if s.name != "taubench-airline-t19-r0.openai.json" {
			continue
		}
		srv := service.New(service.Options{Summarizers: reg, Cache: cache.NewMemory(cache.MemoryOptions{})})
		window := max(sessionMinWindow, int64(0.35*float64(tokensOf(t, srv, s.msgs))))
		compactInSteps(t, srv, s, "extractive", window, func(k, turn int, resp *compactorv1.CompactResponse, prev string, dropped int) {
			sm := resp.GetSummary()
			fmt.Printf("=== compaction %d turn %d dropped %v total %d ret %d app %d trimmed %v tokens %d\n%s\n", k, turn, sm.GetRequestsDropped(), sm.GetRequestsTotal(), sm.GetRequestsRetained(), sm.GetRequestsAppended(), sm.GetCheckTrimmed(), sm.GetOutputTokens(), sm.GetText())
		})
	}
}

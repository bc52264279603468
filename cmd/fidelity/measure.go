package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/service"
	"github.com/compactord/compactord/summarize"
)

// row is one conversation's measurement.
type row struct {
	name           string
	tokens, window int64
	compacted      bool
	reason         string
	err            error
	fid            fidelity.Fidelity
	summaryTokens  int64
	replacedTokens int64
	budget         int64
	appended       int32 // requests + paths the check appended
	withinBudget   bool
}

// report is one summarizer's measurement over the corpus.
type report struct {
	summarizer string
	rows       []row
}

// measureAll compacts every file with the named summarizer.
func measureAll(ctx context.Context, name string, files []string) (report, error) {
	rep := report{summarizer: name}
	var cfg *summarize.Config
	sumName := ""
	switch name {
	case "extractive":
	case "oneline":
		llm := startOneLine()
		defer llm.Close()
		cfg = &summarize.Config{Summarizers: []summarize.SummarizerConfig{{
			Name: "oneline", Kind: "openai", BaseURL: llm.URL + "/v1", Model: "one-line", Timeout: 30e9,
		}}}
		sumName = "oneline"
	default:
		return rep, fmt.Errorf("unknown summarizer %q (extractive, oneline)", name)
	}
	reg, err := summarize.NewRegistry(cfg, "", summarize.Options{})
	if err != nil {
		return rep, err
	}
	srv := service.New(service.Options{Summarizers: reg, Cache: cache.NewMemory(cache.MemoryOptions{})})
	for _, f := range files {
		rep.rows = append(rep.rows, measureOne(ctx, srv, sumName, f))
	}
	return rep, nil
}

// measureOne follows the method of issue 16 for one conversation.
func measureOne(ctx context.Context, srv *service.Server, sumName, path string) row {
	r := row{name: filepath.Base(path)}
	body, err := os.ReadFile(path)
	if err != nil {
		r.err = err
		return r
	}
	lifted, err := format.Lift(&compactorv1.LiftRequest{Body: string(body)})
	if err != nil {
		r.err = fmt.Errorf("lift: %w", err)
		return r
	}
	msgs := lifted.GetMessages()
	plan, err := srv.Plan(ctx, &compactorv1.PlanRequest{Messages: msgs, Policy: &compactorv1.Policy{ContextWindow: 1 << 30}})
	if err != nil {
		r.err = fmt.Errorf("count: %w", err)
		return r
	}
	r.tokens = plan.GetTokensBefore()
	r.window = max(4000, r.tokens*60/100)
	policy := &compactorv1.Policy{ContextWindow: r.window}
	resp, err := srv.Compact(ctx, &compactorv1.CompactRequest{Messages: msgs, Policy: policy, Force: true, Summarizer: sumName})
	if err != nil {
		r.err = err
		return r
	}
	r.compacted, r.reason = resp.GetCompacted(), resp.GetReason()
	p := resp.GetPlan()
	if !r.compacted || p.GetAction() != compactorv1.Action_ACTION_SUMMARIZE {
		if r.reason == "" {
			r.reason = "action " + p.GetAction().String()
		}
		r.fid = fidelity.Fidelity{Requests: 1, Paths: 1}
		r.withinBudget = true
		return r
	}
	var rng []*compactorv1.Message
	for i := range int(p.GetCutIndex()) {
		if p.GetDispositions()[i] == compactorv1.Disposition_DISPOSITION_SUMMARIZE &&
			msgs[i].GetKind() != compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
			rng = append(rng, msgs[i])
			r.replacedTokens += p.GetMessageTokens()[i]
		}
	}
	r.fid = fidelity.Measure(rng, resp.GetMessages())
	s := resp.GetSummary()
	sp, err := srv.Plan(ctx, &compactorv1.PlanRequest{Messages: []*compactorv1.Message{{Role: compactorv1.Role_ROLE_USER,
		Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s.GetText()}}}}}},
		Policy: &compactorv1.Policy{ContextWindow: 1 << 30}})
	if err != nil {
		r.err = fmt.Errorf("count the summary: %w", err)
		return r
	}
	r.summaryTokens = sp.GetTokensBefore()
	// The budget the service gives the summary: half the tokens it replaces (the default
	// max summary ratio), and the policy's summary room.
	r.budget = min(r.replacedTokens/2, engine.DefaultSummaryMaxTokens)
	r.withinBudget = r.summaryTokens <= r.budget
	r.appended = s.GetRequestsAppended() + s.GetPathsAppended()
	return r
}

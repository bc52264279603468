package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/engine/tokenizer"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/internal/measure"
	"github.com/compactord/compactord/service"
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
	// mustHold is the tokens of what the summary must hold (the requests not kept beside it
	// and the paths): when it exceeds budget, the goals cannot be met.
	mustHold int64
}

// holdable reports whether the summary's budget can hold what it must.
func (r row) holdable() bool { return r.mustHold <= r.budget }

// report is one summarizer's measurement over the corpus at one window share.
type report struct {
	summarizer string
	share      float64 // the context window, as a share of each conversation's tokens
	rows       []row
}

// minWindow is the smallest context window the measure compacts to.
const minWindow = 4000

// measureAll compacts every file with the named summarizer, at a context window of share
// of each conversation's tokens (minWindow at least).
func measureAll(ctx context.Context, name string, files []string, share float64) (report, error) {
	rep := report{summarizer: name, share: share}
	sum, err := measure.NewSummarizer(name)
	if err != nil {
		return rep, err
	}
	defer sum.Close()
	srv, sumName := sum.Server(nil), sum.Name
	for _, f := range files {
		rep.rows = append(rep.rows, measureOne(ctx, srv, sumName, f, share))
	}
	return rep, nil
}

// measureOne follows the method of issue 16 for one conversation: it compacts the file at
// path to share of its tokens with the summarizer sumName and measures the summary's
// fidelity to the summarized range, its size against its budget and what it must hold. A
// failure is reported in the row's err.
func measureOne(ctx context.Context, srv *service.Server, sumName, path string, share float64) row {
	r := row{name: filepath.Base(path)}
	lifted, err := measure.Lift(path)
	if err != nil {
		r.err = err
		return r
	}
	msgs := lifted.GetMessages()
	plan, err := srv.Plan(ctx, &compactorv1.PlanRequest{Messages: msgs, Policy: &compactorv1.Policy{ContextWindow: 1 << 30}})
	if err != nil {
		r.err = fmt.Errorf("count: %w", err)
		return r
	}
	r.tokens = plan.GetTokensBefore()
	r.window = max(minWindow, int64(float64(r.tokens)*share))
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
	var rngIdx []int // rngIdx[k] is the index in msgs of rng[k]
	for i := range int(p.GetCutIndex()) {
		switch p.GetDispositions()[i] {
		case compactorv1.Disposition_DISPOSITION_KEEP_REQUEST: // in the range, kept beside the summary
			rng = append(rng, msgs[i])
			rngIdx = append(rngIdx, i)
		case compactorv1.Disposition_DISPOSITION_SUMMARIZE:
			if msgs[i].GetKind() != compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
				rng = append(rng, msgs[i])
				rngIdx = append(rngIdx, i)
				r.replacedTokens += p.GetMessageTokens()[i]
			}
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
	// max summary ratio), and the summary room the plan reserved less the summary message's
	// framing.
	tc, err := tokenizer.New(tokenizer.O200k)
	if err != nil {
		r.err = err
		return r
	}
	frame := engine.SummaryFrameTokens(tc, int(p.GetCutIndex()))
	r.budget = min(r.replacedTokens/2, p.GetSummaryTokens()-frame)
	r.withinBudget = r.summaryTokens <= r.budget
	// What the summary must hold: the requests the plan did not keep beside it, and the
	// paths, each as the check would append it.
	var must strings.Builder
	reqs := fidelity.RangeRequests(rng, msgs[:p.GetCutIndex()])
	for _, q := range reqs {
		if p.GetDispositions()[rngIdx[q.Index]] != compactorv1.Disposition_DISPOSITION_KEEP_REQUEST {
			must.WriteString(q.Text + "\n")
		}
	}
	must.WriteString(strings.Join(fidelity.Paths(rng, reqs), ", "))
	mp, err := srv.Plan(ctx, &compactorv1.PlanRequest{Messages: []*compactorv1.Message{{Role: compactorv1.Role_ROLE_USER,
		Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: must.String()}}}}}},
		Policy: &compactorv1.Policy{ContextWindow: 1 << 30}})
	if err != nil {
		r.err = fmt.Errorf("count what the summary must hold: %w", err)
		return r
	}
	r.mustHold = mp.GetTokensBefore()
	r.appended = s.GetRequestsAppended() + s.GetPathsAppended()
	return r
}

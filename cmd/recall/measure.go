package main

import (
	"context"
	"fmt"
	"slices"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/measure"
	"github.com/compactord/compactord/recalltool"
	"github.com/compactord/compactord/service"
)

// The methods compared, in report order.
const (
	methodCompact = iota
	methodTruncate
	methodMask
	numMethods
)

var methodNames = [numMethods]string{"compactord", "truncation", "observation masking"}

// row is one conversation's measurement.
type row struct {
	name            string
	msgs, split     int
	history, window int64 // tokens of the history; the compaction's context window (a share of the whole conversation's tokens)
	budget          int64 // tokens of the compacted history: every method's budget
	tokensAfter     int64 // the plan's tokens_after
	trigger         int64
	action          string
	err             error
	notCompacted    bool // err says Compact did not compact
	needed          []fidelity.Fact
	kept            [numMethods][]bool
	// recoverable marks the needed facts in the compacted history or in the sources its
	// summary and markers cite, read back through Expand.
	recoverable []bool
	citing      bool // the compacted history cites a source (its summary's marker, at least)
	bare, lines int  // the summary's bare-name lines, of its lines
	runs, chars int  // the summary's bytes in bare name runs (fidelity.BareNameRuns), of its bytes
}

// nameRuns is the share of the summary's bytes in bare name runs.
func (r row) nameRuns() float64 {
	if r.chars == 0 {
		return 0
	}
	return float64(r.runs) / float64(r.chars)
}

// recall is the share of needed facts method m kept (1 when none were needed).
func (r row) recall(m int) float64 { return r.share(r.kept[m]) }

// recoverableRecall is the share of needed facts compactord's compaction kept recoverable.
func (r row) recoverableRecall() float64 { return r.share(r.recoverable) }

// share is the share of needed facts kept marks (1 when none were needed).
func (r row) share(kept []bool) float64 {
	if len(r.needed) == 0 {
		return 1
	}
	n := 0
	for _, k := range kept {
		if k {
			n++
		}
	}
	return float64(n) / float64(len(r.needed))
}

// report is the measurement over a corpus.
type report struct {
	corpus     string
	summarizer string
	opt        options
	rows       []row
}

// measureAll measures every file with the summarizer o names.
func measureAll(ctx context.Context, o options, files []corpus.File) (report, error) {
	rep := report{summarizer: o.summarizer, opt: o}
	sum, err := measure.NewSummarizer(o.summarizer)
	if err != nil {
		return rep, err
	}
	defer sum.Close()
	counter := engine.NewCounter(64 << 20)
	m := measurer{srv: sum.Server(counter), counter: counter, sumName: sum.Name, opt: o}
	for _, f := range files {
		rep.rows = append(rep.rows, m.one(ctx, f))
	}
	return rep, nil
}

type measurer struct {
	srv     *service.Server
	counter *engine.Counter
	sumName string
	opt     options
}

// count is the tokens of one message, as the plan counts it.
func (m *measurer) count(msg *compactorv1.Message) int64 {
	n, err := m.counter.Message(msg, "")
	if err != nil {
		panic(err) // the default tokenizer always exists
	}
	return n
}

func (m *measurer) total(msgs []*compactorv1.Message) int64 {
	var n int64
	for _, msg := range msgs {
		n += m.count(msg)
	}
	return n
}

// one measures one conversation.
func (m *measurer) one(ctx context.Context, f corpus.File) row {
	r := row{name: f.Name}
	lifted, err := measure.Lift(f.Path)
	if err != nil {
		r.err = err
		return r
	}
	msgs := lifted.GetMessages()
	r.msgs = len(msgs)
	r.split = measure.AssistantNear(msgs, m.opt.split)
	if r.split < 0 {
		r.err = fmt.Errorf("no assistant message to split before")
		return r
	}
	history, future := msgs[:r.split], msgs[r.split:]
	r.needed = fidelity.Needed(history, future)
	r.history = m.total(history)
	r.window = int64(float64(m.total(msgs)) * m.opt.window)
	resp, err := m.srv.Compact(ctx, &compactorv1.CompactRequest{Messages: history, Force: true, Summarizer: m.sumName,
		Policy: &compactorv1.Policy{ContextWindow: r.window}})
	if err != nil {
		r.err = err
		return r
	}
	p := resp.GetPlan()
	r.action, r.tokensAfter, r.trigger = p.GetAction().String(), p.GetTokensAfter(), p.GetTriggerAtTokens()
	compacted := resp.GetMessages()
	if !resp.GetCompacted() {
		r.err, r.notCompacted = fmt.Errorf("not compacted: %s %s", r.action, resp.GetReason()), true
		return r
	}
	r.budget = m.total(compacted)
	r.kept[methodCompact] = fidelity.Recall(r.needed, compacted)
	// What the compaction keeps recoverable: the compacted history and the original
	// messages it cites, read back as a host would, through Expand.
	cited, err := recalltool.Answerer{Client: recalltool.ExpanderFunc(m.srv.Expand)}.Sources(ctx, compacted)
	if err != nil {
		r.err = fmt.Errorf("reading the cited sources: %w", err)
		return r
	}
	r.citing = len(cited) > 0
	recoverable := slices.Clone(compacted)
	for _, s := range cited {
		recoverable = append(recoverable, s.Message)
	}
	r.recoverable = fidelity.Recall(r.needed, recoverable)
	r.kept[methodTruncate] = fidelity.Recall(r.needed, fidelity.Truncation(history, r.budget, m.count))
	r.kept[methodMask] = fidelity.Recall(r.needed, fidelity.ObservationMasking(history, r.budget, m.count))
	r.bare, r.lines = fidelity.BareLines(resp.GetSummary().GetText())
	r.runs, r.chars = fidelity.BareNameRuns(resp.GetSummary().GetText())
	return r
}

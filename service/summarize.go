package service

import (
	"context"
	"fmt"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/summarize"
	"github.com/compactord/compactord/summary"
	"go.opentelemetry.io/otel/attribute"
)

// Writing one summary: what the summarizer is given, the budget it must meet, the call itself
// under the tenant's admission, and the summary check before the entry is stored.

// minSummaryTokens is the smallest summary budget worth asking for: below it a range is
// too short to summarize.
const minSummaryTokens = 32

// summaryJob is what one summarizer call is given and must meet: the messages (the requests a
// base released, then the summarized messages after it, the requests kept verbatim among
// them), those kept verbatim, the bounded anchor, and the tokens the summary replaces.
type summaryJob struct {
	in, kept []*compactorv1.Message
	pos      []int // the position of each of in in the conversation, ascending
	released int   // in opens with this many requests its base released
	anchor   string
	inTokens int64 // the range and the anchor: what the summary replaces
	read     int64 // the call's input: what of the range it reads, and the anchor
	budget   int64 // the longest summary: maxSummaryRatio × inTokens, within the room
	end      int   // the summary stands for msgs[0:end] (the cut, or a chunk's end)
	chunk    bool  // one call of a chunked summary: never sent as the agent's request (chunks)
	attrs    []attribute.KeyValue
}

// summarize writes the summary of msgs[0:cut] on top of base b (see job), within a budget it
// can meet, and checks it (see package fidelity) so the entry is stored checked. A range too
// short for any summary to pay returns an error wrapping errUnpaid.
func (c *compaction) summarize(ctx context.Context, b base) (*cache.Entry, error) {
	j, err := c.job(b)
	if err != nil {
		return nil, err
	}
	res, err := c.chunks(ctx, j)
	if err != nil {
		return nil, err
	}
	text, rep, err := c.checked(res.Text, j)
	if err != nil {
		return nil, err
	}
	res.Text = text // the checked summary is the one stored and served
	return &cache.Entry{
		Output:          res.Output,
		Summarizer:      c.sum.Fingerprint().Name,
		CoveredMessages: int32(c.cut),
		Kept:            c.kept,
		Room:            c.room,
		Created:         time.Now().UTC(),
		Check:           rep,
	}, nil
}

// job gathers what a summary built on b is given: the requests b released and the summarized
// messages of msgs[b.from:cut] on top of b.anchor (bounded by the room), and its budget: at
// most maxSummaryRatio of the tokens it replaces, and the summary room the plan reserved
// (less the summary message's framing). A range too short for any summary to pay returns an
// error wrapping errUnpaid.
func (c *compaction) job(b base) (summaryJob, error) {
	j := summaryJob{end: c.cut}
	j.anchor, j.inTokens = c.s.boundAnchor(b.anchor, c.tokenizer(), c.room)
	for _, i := range b.released {
		j.in, j.pos = append(j.in, c.folded(int(i))), append(j.pos, int(i))
		j.inTokens += c.plan.GetMessageTokens()[i]
	}
	for i := b.from; i < c.cut; i++ {
		switch c.plan.GetDispositions()[i] {
		case compactorv1.Disposition_DISPOSITION_KEEP_REQUEST:
			j.in, j.pos = append(j.in, c.folded(i)), append(j.pos, i)
			j.kept = append(j.kept, c.folded(i))
			j.inTokens += c.d.HostTokens(i) // the host's text beside the words it keeps
		case compactorv1.Disposition_DISPOSITION_SUMMARIZE:
			if c.summarized(i) {
				j.in, j.pos = append(j.in, c.folded(i)), append(j.pos, i)
				j.inTokens += c.plan.GetMessageTokens()[i]
			}
		}
	}
	j.read, j.released = j.inTokens, len(b.released)
	j.budget = min(int64(c.s.maxSummaryRatio*float64(j.inTokens)), c.room)
	switch {
	case j.inTokens == 0:
		return j, fmt.Errorf("compact: %w: nothing before the cut is left to summarize: its requests stay verbatim after the summary", errUnpaid)
	case j.budget < minSummaryTokens:
		return j, fmt.Errorf("compact: %w: the summarized range has %d tokens; a summary may have at most %.2f × that (%d tokens), less than the %d a summary needs",
			errUnpaid, j.inTokens, c.s.maxSummaryRatio, j.budget, minSummaryTokens)
	}
	return j, nil
}

// call has the summarizer write j's summary: an LLM summarizer is first admitted under the
// tenant's token budget for what the call may spend (its input, the instructions and the
// summary), and charged what it spent.
func (c *compaction) call(ctx context.Context, j summaryJob) (summarize.Result, error) {
	name := c.sum.Fingerprint().Name
	var agent *summarize.AgentPrompt
	if !j.chunk { // the agent's request holds the whole range, more than a chunk
		agent = c.agentPrompt(j.kept)
	}
	spent := func(int64) {}
	if c.s.admit != nil && summarize.CallsModel(c.sum) {
		read := j.read
		if agent != nil { // a request as the agent's own may read past the cut
			read = max(read, agent.MaxInputTokens())
		}
		estimate := read + c.s.textMessageTokens(c.req.GetInstructions(), c.tokenizer()) + j.budget
		var err error
		if spent, err = c.s.admit.AdmitSummary(ctx, tenant(ctx), estimate); err != nil {
			return summarize.Result{}, err
		}
	}
	start := time.Now()
	res, err := c.sum.Summarize(ctx, summarize.Request{
		Attributes: append([]attribute.KeyValue{attrPrefixHash.String(c.plan.GetPrefixHash()), cache.AttrHit.Bool(false),
			attrTokensBefore.Int64(c.plan.GetTokensBefore()), attrTokensAfter.Int64(c.plan.GetTokensAfter())}, j.attrs...),
		SummaryInput: engine.SummaryInput{Messages: j.in, Positions: j.pos, Kept: j.kept, Anchor: j.anchor, Instructions: c.req.GetInstructions(),
			TaskInHead: c.headTask},
		MaxOutputTokens: j.budget,
		Count:           c.count,
		Agent:           agent,
	})
	c.s.metrics.ObserveSummarizer(ctx, name, time.Since(start), err)
	spent(res.InputTokens + res.OutputTokens)
	if err != nil {
		return res, fmt.Errorf("compact: %w", err)
	}
	return res, nil
}

// checked runs the summary check on text, the summarizer's summary of j, and returns the
// checked text and what the check found.
func (c *compaction) checked(text string, j summaryJob) (string, summary.Check, error) {
	text, rep := c.check(text, j.end, int(j.budget), c.count)
	if out := c.count(text); float64(out) > c.s.maxSummaryRatio*float64(j.inTokens) {
		// Check keeps the text within budget; this guards the invariant.
		return "", rep, fmt.Errorf("compact: %w: the checked summary has %d tokens, more than %.2f × the %d tokens it replaces",
			errUnpaid, out, c.s.maxSummaryRatio, j.inTokens)
	}
	c.s.metrics.ObserveCheck(rep)
	return text, rep, nil
}

// tokenizer is the tokenizer the request's policy names.
func (c *compaction) tokenizer() string { return c.req.GetPolicy().GetTokenizer() }

// count measures text in tokens under the request's tokenizer.
func (c *compaction) count(text string) int { return int(c.s.textMessageTokens(text, c.tokenizer())) }

// boundAnchor bounds the previous summary a new one builds on by the policy: a summary
// compactord wrote is at most the summary room, so an anchor of more than twice that (a
// caller's own text in a COMPACT_SUMMARY message, or a room since made smaller) is cut to
// it, keeping its head and tail. It returns the anchor and its tokens.
func (s *Server) boundAnchor(anchor, tok string, room int64) (string, int64) {
	n := s.textMessageTokens(anchor, tok)
	if limit := 2 * room; n > limit {
		anchor = engine.Truncate(anchor, int(int64(len(anchor))*room/n))
		n = s.textMessageTokens(anchor, tok)
	}
	return anchor, n
}

// summarized reports whether msgs[i] is replaced by the summary.
func (c *compaction) summarized(i int) bool {
	return c.plan.GetDispositions()[i] == compactorv1.Disposition_DISPOSITION_SUMMARIZE &&
		c.msgs[i].GetKind() != compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY
}

// check runs the summary check over the range a summary of msgs[0:end] replaces since the
// conversation's latest summary (whatever cached prefix the summary was built on), with what
// that summary carried (its requests and files), against the summary and the head messages
// kept before end (the tail is left out: the entry is cached for every conversation sharing
// the prefix). The check's report names the messages of the requests it dropped.
func (c *compaction) check(text string, end, budget int, count func(string) int) (string, summary.Check) {
	rng, pos, kept := c.split(end)
	var earlier summarize.Carried
	si := int(c.plan.GetSummaryIndex())
	if si >= 0 {
		earlier = summarize.AnchorCarried(engine.SummaryText(c.msgs[si]))
	}
	text, rep := fidelity.Check(fidelity.CheckInput{Summary: text, Range: rng, Kept: kept, Budget: budget, Count: count,
		EarlierRequests: earlier.Requests, EarlierPaths: earlier.Paths})
	var reqs []fidelity.Request // the range's requests, once one of them is dropped
	for _, n := range rep.RequestsDropped {
		at := si // a request the previous summary carried
		if k := n - 1 - len(earlier.Requests); k >= 0 {
			if reqs == nil {
				reqs = fidelity.RangeRequests(rng, kept)
			}
			at = pos[reqs[k].Index]
		}
		rep.DroppedMessages = append(rep.DroppedMessages, at)
	}
	return text, rep
}

// split returns the messages a summary of msgs[0:end] replaces since the conversation's
// latest summary (the requests kept verbatim included: the check counts them as kept) with
// their positions, and the messages kept before end: the head and the kept requests.
func (c *compaction) split(end int) (rng []*compactorv1.Message, pos []int, kept []*compactorv1.Message) {
	for i := range end {
		d := c.plan.GetDispositions()[i]
		if sp, ok := c.splits[i]; ok {
			kept = append(kept, sp.standing)
		}
		switch {
		case d == compactorv1.Disposition_DISPOSITION_KEEP:
			kept = append(kept, c.msgs[i])
		case d == compactorv1.Disposition_DISPOSITION_KEEP_REQUEST:
			kept = append(kept, engine.RequestWords(c.folded(i)))
			rng, pos = append(rng, c.folded(i)), append(pos, i)
		case i > int(c.plan.GetSummaryIndex()) && c.summarized(i):
			rng, pos = append(rng, c.folded(i)), append(pos, i)
		}
	}
	return rng, pos, kept
}

// textRoom is the summary text the plan's summary room holds: the room less the framing of
// a summary message covering up to cut messages. A summary message of a text within it
// stays within the room the plan counted (engine.SummaryFrameTokens keeps a margin for the
// tokens joining adds), so tokens_after bounds what Compact returns.
func (c *compaction) textRoom() (int64, error) {
	frame, err := c.s.counter.SummaryFrameTokens(c.cut, c.tokenizer())
	if err != nil {
		return 0, err
	}
	return c.plan.GetSummaryTokens() - frame, nil
}

// textMessageTokens counts the tokens of a user message whose one part is text, under the
// request's tokenizer (the memoized counter's count): the text's tokens and the message's
// framing, so at least what text adds wherever it is put.
func (s *Server) textMessageTokens(text, tokenizer string) int64 {
	if text == "" {
		return 0
	}
	n, err := s.counter.Message(&compactorv1.Message{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{
		{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: text}}},
	}}, tokenizer)
	if err != nil { // the tokenizer was validated by Decide
		return int64(len(text)+3) / 4
	}
	return n
}

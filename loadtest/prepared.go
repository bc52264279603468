package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bojand/ghz/runner"
	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"google.golang.org/protobuf/proto"
)

// Prepared summaries (-prepared): Compact at the trigger, every conversation new, with the
// fake LLM at a realistic latency (-llm-latency, 5 s in `make loadtest-prepared`), measured
// twice with ghz over the same number of calls:
//
//  1. without preparation: each Compact writes its summary, waiting for the fake LLM;
//  2. prepared: each conversation was first sent as Compact with prepare set (which answers
//     at once), and the measured Compact comes once the preparations are done, as a host's
//     does turns later: it is served the prepared summary.
//
// The goal: p50 of the prepared Compacts under 50 ms, and no fake-LLM call during them.

// preparedConversation is the conversation of -prepared: 20 messages of a SWE-agent run.
const preparedConversation = "sweagent-marshmallow-1867-fc-replace-from-source.openai.json"

// preparedGoal is the p50 a Compact at the trigger must reach from a prepared summary.
const preparedGoal = 50 * time.Millisecond

// preparedPhase is what one phase of -prepared measured.
type preparedPhase struct {
	name     string
	ok, errs int
	p50, p99 time.Duration
	llmCalls int64 // fake-LLM calls made during the phase
}

// runPrepared measures Compact at the trigger with and without preparation and writes
// results/prepared.md. It reports whether the goal held.
func runPrepared(ctx context.Context, f flags) (bool, error) {
	repoRoot, err := findRepoRoot()
	if err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp("", "compactord-prepared-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	if f.bin, err = serverBinary(ctx, f.bin, repoRoot, tmp); err != nil {
		return false, err
	}
	var procs []*proc
	var closers cleanups
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop(5 * time.Second)
		}
		closers.run()
	}()
	e, topology, err := startServers(ctx, f, tmp, f.bin, &procs, &closers)
	if err != nil {
		return false, err
	}
	base, err := triggerRequest(ctx, e, repoRoot)
	if err != nil {
		return false, err
	}
	n := int64(f.preparedCalls)
	cold, err := e.triggerPhase(ctx, "without preparation", base, e.seq.Add(n)-n+1, n, false)
	if err != nil {
		return false, err
	}
	warm, err := e.triggerPhase(ctx, "prepared", base, e.seq.Add(n)-n+1, n, true)
	if err != nil {
		return false, err
	}
	held := warm.errs == 0 && cold.errs == 0 && warm.llmCalls == 0 && warm.p50 < preparedGoal
	rep := preparedReport(f, topology, base, []*preparedPhase{cold, warm}, held, gitDescribe(repoRoot))
	out := filepath.Join(repoRoot, "loadtest", "results", "prepared.md")
	if err := os.WriteFile(out, []byte(rep), 0o644); err != nil {
		return false, err
	}
	fmt.Print(rep)
	logf("wrote %s", out)
	return held, nil
}

// triggerRequest is the Compact of -prepared: the conversation under a window that puts it
// just above its trigger (not forced; pruning off, so it summarizes), summarized by the fake
// LLM.
func triggerRequest(ctx context.Context, e *env, repoRoot string) (*compactorv1.CompactRequest, error) {
	dir, err := corpusDir(repoRoot)
	if err != nil {
		return nil, err
	}
	msgs, err := liftCorpus(ctx, e.replicas[0].conn, dir, preparedConversation)
	if err != nil {
		return nil, err
	}
	k, err := turnCut(msgs, 20)
	if err != nil {
		return nil, err
	}
	msgs = msgs[:k]
	client := compactorv1.NewCompactorServiceClient(e.replicas[0].conn)
	plan, err := client.Plan(ctx, &compactorv1.PlanRequest{Messages: msgs, Policy: &compactorv1.Policy{ContextWindow: 1 << 20}})
	if err != nil {
		return nil, err
	}
	// A window of T / 0.75 reserves a tenth and triggers at 0.8 of the rest: at 0.96 T.
	window := plan.GetTokensBefore() * 4 / 3
	req := &compactorv1.CompactRequest{Messages: msgs, Summarizer: "fake-llm", Policy: &compactorv1.Policy{ContextWindow: window,
		Prune: &compactorv1.PrunePolicy{Disabled: true}}} // a summary, not pruning alone
	plan, err = client.Plan(ctx, &compactorv1.PlanRequest{Messages: msgs, Policy: req.GetPolicy()})
	if err != nil {
		return nil, err
	}
	if plan.GetAction() != compactorv1.Action_ACTION_SUMMARIZE {
		return nil, fmt.Errorf("%s at a window of %d: %v, want a summary (%s)", preparedConversation, window, plan.GetAction(), plan.GetReason())
	}
	return req, nil
}

// triggerPhase sends n Compacts of base, conversation i made unique by seq first+i, through
// ghz with up to 16 workers; with prepared, each conversation is first sent with prepare set
// and the load waits until the fake LLM has answered every preparation.
func (e *env) triggerPhase(ctx context.Context, name string, base *compactorv1.CompactRequest, first, n int64, prepared bool) (*preparedPhase, error) {
	if prepared {
		if err := e.prepareAll(ctx, base, first, n); err != nil {
			return nil, err
		}
	}
	var next atomic.Int64
	codec := newLoadCodec(false)
	codec.gen = func() ([]byte, error) {
		req, err := uniqueRequest(base, first+next.Add(1)-1)
		if err != nil {
			return nil, err
		}
		return proto.Marshal(req)
	}
	body, err := proto.Marshal(base)
	if err != nil {
		return nil, err
	}
	opts := []runner.Option{
		runner.WithProtosetBinary(e.protoset), runner.WithInsecure(true),
		runner.WithConcurrency(uint(min(n, 16))), runner.WithTotalRequests(uint(n)),
		runner.WithTimeout(callTimeout), runner.WithBinaryData(body), runner.WithName(name),
		runner.WithDisableTemplateData(true), runner.WithDisableTemplateFuncs(true),
		runner.WithDefaultCallOptions(codec.callOptions()),
	}
	calls := e.llm.Calls()
	rep, err := runner.Run("compactor.v1.CompactorService.Compact", e.replicas[0].addr, opts...)
	rearmSignals()
	if err != nil {
		return nil, fmt.Errorf("ghz %s: %s", name, oneLine(err.Error(), 300))
	}
	s := shedSummary(shedPhase{name: name}, rep)
	ph := &preparedPhase{name: name, ok: s.ok, errs: s.refused + s.deadline + s.other, p50: s.p50, p99: s.p99,
		llmCalls: e.llm.Calls() - calls}
	logf("%s: %d ok, %d errors, p50 %v, p99 %v, %d fake-LLM calls", name, ph.ok, ph.errs, ph.p50, ph.p99, ph.llmCalls)
	return ph, nil
}

// prepareAll sends conversations first … first+n−1 as Compacts with prepare set (again after a
// moment when the tenant's bound of preparations refuses one) and waits until the fake LLM
// has answered n more calls and the summaries are stored.
func (e *env) prepareAll(ctx context.Context, base *compactorv1.CompactRequest, first, n int64) error {
	before := e.llm.Calls()
	for i := range n {
		req, err := uniqueRequest(base, first+i)
		if err != nil {
			return err
		}
		req.(*compactorv1.CompactRequest).Prepare = true
		for {
			out, err := invoke(ctx, e.replicas[0], &Scenario{Call: "compactor.v1.CompactorService/Compact"}, req)
			if err != nil {
				return err
			}
			r := out.(*compactorv1.CompactResponse).GetReason()
			if strings.HasPrefix(r, "preparing the summary") {
				break
			}
			if !strings.HasPrefix(r, "not prepared: the tenant has") { // its bound: a host asks again later
				return fmt.Errorf("a Compact with prepare answered %q", r)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	deadline := time.Now().Add(callTimeout)
	for e.llm.Calls()-before < n {
		if time.Now().After(deadline) {
			return errors.New("the preparations did not reach the fake LLM in time")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	time.Sleep(e.llm.Latency + 500*time.Millisecond) // the last calls answered and stored
	return nil
}

// preparedReport is results/prepared.md.
func preparedReport(f flags, topology string, base *compactorv1.CompactRequest, phases []*preparedPhase, held bool, rev string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Compact at the trigger, with and without a prepared summary\n\n")
	fmt.Fprintf(&b, "`cd loadtest && go run . -prepared -llm-latency %s -prepared-calls %d` at %s on %s (%d CPUs). %s.\n\n",
		f.llmLatency, f.preparedCalls, rev, cpuModel(), runtime.NumCPU(), topology)
	fmt.Fprintf(&b, "Each call is a Compact of a new conversation (%d messages of `%s`, a marker in its first user message) at a window of %d tokens, "+
		"just above its trigger; ghz sends %d of them with %d workers. Prepared: each conversation was sent first as Compact with `prepare` set, "+
		"and measured once its preparation was done.\n\n", len(base.GetMessages()), preparedConversation, base.GetPolicy().GetContextWindow(),
		f.preparedCalls, min(f.preparedCalls, 16))
	b.WriteString("| phase | ok | errors | p50 | p99 | fake-LLM calls during the phase |\n|---|---|---|---|---|---|\n")
	for _, p := range phases {
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %d |\n", p.name, p.ok, p.errs, p.p50.Round(100*time.Microsecond), p.p99.Round(100*time.Microsecond), p.llmCalls)
	}
	verdict := "held"
	if !held {
		verdict = "NOT held"
	}
	fmt.Fprintf(&b, "\nGoal (p50 of a prepared Compact under %s, no fake-LLM call): %s.\n", preparedGoal, verdict)
	return b.String()
}

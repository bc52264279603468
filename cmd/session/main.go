// Command session replays real agent conversations turn by turn through compactord exactly
// as a host does, and measures what a whole session of compactions keeps and costs (issue
// 32, and issue 37's warm cache).
//
// For each conversation of the corpus (*.openai.json, *.anthropic.json), at each context
// window W = max(8,000, ratio × N) (-windows; N the conversation's tokens): the host holds
// what it persisted, at first nothing; before each assistant message it calls Plan on what it
// holds (one model request); when the plan acts it calls Compact (not forced, the same
// policy) and persists the messages returned; then it appends the message. Claude Code
// conversations carry the real CLAUDE.md block, read at run time from the Claude Code request
// in the repository's corpus, as the first text part of their first user message.
//
// It reports, per session and as means over the sessions that compacted: the lines of the
// user's requests and of the CLAUDE.md block present verbatim at the end; the identifiers the
// agent wrote after each compaction (and held before it) present right after it; compactions
// on the turn right after another, and which of them that one turn's growth allows; the size
// after each compaction as a share of the usable window; the input cost of the session's
// requests at Anthropic's cache prices against the same requests had each extended the
// previous one; and Compact's errors. With -warm, each session is also replayed on a server
// whose cache other calls of the same tenant filled with summaries of the same conversation
// (forced compactions at 50% of N, then the replay at 25%), and both are reported.
//
// Usage:
//
//	session [-corpus DIR] [-windows 0.35,0.6] [-headroom N] [-summarizer NAME] [-warm] [-o FILE]
//
// NAME is extractive, oneline, or one of anthropic, openai-chat and openai-responses (a
// summarizer of that API against a fake provider that bills a prompt cache by prefix, to
// which the replayed agent sends each of its requests), with "-agent" for the summary request
// sent as the agent's own (CompactRequest.agent_request); with the fake provider, the summary
// input billed is reported too.
//
// -headroom sets Policy.headroom_turns (default: the policy's, 8): the turns of the session's
// own the target leaves below the trigger. A larger headroom lands each compaction lower,
// so that the session compacts less often and rewrites the provider's cache less, at the
// price of what each compaction keeps; the replay measures both sides of that trade.
//
// The corpus defaults to the project's own: the fixtures written for compactord and the real
// conversations copied into the repository (internal/corpus/testdata and its real/).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/compactord/compactord/internal/measure"
	"github.com/compactord/compactord/summarize"
)

func main() {
	var o options
	flag.StringVar(&o.corpus, "corpus", "", "corpus directory (default: the project's corpus, the fixtures and real conversations under internal/corpus/testdata)")
	flag.StringVar(&o.summarizer, "summarizer", "extractive", "summarizer under test: "+measure.SummarizerNames+" (a fake LLM answering one line)")
	windows := flag.String("windows", "0.35,0.6", "comma-separated context windows, as shares of each conversation's tokens (8,000 at least)")
	flag.IntVar(&o.headroom, "headroom", 0, "Policy.headroom_turns of every call (0: the policy's default)")
	flag.BoolVar(&o.warm, "warm", false, "also replay each session on a server whose cache other calls filled with summaries of it, and compare")
	out := flag.String("o", "", "write the markdown report to this file (default: stdout)")
	flag.Parse()
	var err error
	if o.windows, err = measure.Shares("windows", *windows); err != nil {
		fmt.Fprintln(os.Stderr, "session:", err)
		os.Exit(2)
	}
	if o.headroom < 0 {
		fmt.Fprintln(os.Stderr, "session: -headroom must not be negative")
		os.Exit(2)
	}
	if err := run(context.Background(), o, *out); err != nil {
		fmt.Fprintln(os.Stderr, "session:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	corpus, summarizer string
	windows            []float64
	headroom           int // Policy.headroom_turns (0: the default)
	warm               bool
}

func run(ctx context.Context, o options, out string) error {
	start := time.Now()
	files, name, err := measure.Conversations(o.corpus)
	if err != nil {
		return err
	}
	rep, err := replayAll(ctx, o, files)
	if err != nil {
		return err
	}
	rep.corpus = name
	rep.env = environment(time.Since(start))
	w, err := measure.Output(out)
	if err != nil {
		return err
	}
	defer w.Close()
	writeMarkdown(w, rep)
	for i, ratio := range o.windows {
		m := rep.means(rep.cold[i])
		fmt.Fprintf(os.Stderr, "session at %.0f%% (%s): %d of %d sessions compacted, %d compactions; requests %.3f, CLAUDE.md %.3f, identifiers %.3f, consecutive %d (allowed %d), size after max %.2f, cache cost %.2f×, errors %d\n",
			100*ratio, name, m.compacted, m.sessions, m.compactions, m.requests.mean(), m.claudeMD.mean(), m.ident.mean(), m.consecutive, m.allowed, m.size.max, m.cost.mean(), m.failures)
	}
	if rep.fake {
		for i, ratio := range o.windows {
			b := summaryBilled(rep.cold[i])
			fmt.Fprintf(os.Stderr, "session at %.0f%%: summary input billed at the cache prices (read 0.1×, written 1.25×): %.0f tokens per compacted session (%d sessions, %d summary calls, %.0f per call; per call %d uncached, %d cache read, %d cache written)\n",
				100*ratio, b.billed/float64(max(b.sessions, 1)), b.sessions, b.calls, perCall(b.billed, b.calls),
				perCall(b.uncached, b.calls), perCall(b.read, b.calls), perCall(b.written, b.calls))
			if b.agentCalls > 0 {
				fmt.Fprintf(os.Stderr, "session at %.0f%%: of which %d calls as the agent's request, per call %d instruction tokens (the rules and sections alone %d); %d calls on the own prompt (no request of the agent to read), %.0f billed in all\n",
					100*ratio, b.agentCalls, perCall(b.instruction, b.agentCalls), rulesTokens(), b.calls-b.agentCalls, b.ownBilled)
			}
		}
	}
	fmt.Fprintf(os.Stderr, "session: %s\n", rep.env.elapsed.Round(time.Second))
	return nil
}

// rulesTokens is what an instruction sent as the agent's request holds whatever the
// conversation (summarize.AgentRules), in the fake provider's tokens: 4 bytes of JSON.
func rulesTokens() int {
	b, err := json.Marshal(summarize.AgentRules())
	if err != nil {
		panic(err) // a string always encodes
	}
	return (len(b) + 3) / 4
}

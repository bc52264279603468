package main

import (
	"context"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/measure"
	"github.com/compactord/compactord/service"
)

// minWindow is the smallest context window a session is replayed at.
const minWindow = 8000

// countWindow is a context window no conversation reaches: a Plan at it only counts.
const countWindow = 1 << 40

// session is one conversation of the corpus as the replay uses it.
type session struct {
	name string
	kind string // the agent, from the file name (agentKind)
	// msgs is the conversation the host replays: for Claude Code, with its CLAUDE.md block.
	msgs []*compactorv1.Message
	// requests are the user's requests (fidelity.Requests) of the conversation without the
	// CLAUDE.md block: for Claude Code, the user's own words of the first message.
	requests []fidelity.Request
	// task is the index in requests of the task (the first request), -1 when it has no line
	// to check.
	task int
	// block is the CLAUDE.md block msgs carry ("" for none), blockLines its lines.
	block      string
	blockLines []string
	tokens     int64 // N: the tokens of msgs
	err        error // why the session could not be replayed
}

// The agents of the corpus, by file name prefix (internal/corpus/testdata/real/MANIFEST.md).
var agentPrefixes = []struct{ prefix, kind string }{
	{"minisweagent-", kindMiniSWE}, {"sweagent-", kindSWE}, {"taubench-", "tau-bench"},
	{"claudecode-", kindClaudeCode}, {"claudetrace-", kindClaudeCode}, {"fixture-", "fixture"},
}

const (
	kindSWE        = "SWE-agent"
	kindMiniSWE    = "mini-swe-agent"
	kindClaudeCode = "Claude Code"
)

// agentKind names the agent of a corpus file by its name's prefix ("other" for none).
func agentKind(name string) string {
	for _, a := range agentPrefixes {
		if strings.HasPrefix(name, a.prefix) {
			return a.kind
		}
	}
	return "other"
}

// sweTask reports whether the session's task counts among the SWE-agent tasks.
func (s *session) sweTask() bool { return s.kind == kindSWE || s.kind == kindMiniSWE }

// prepare lifts f and makes it a session: Claude Code conversations (measure.IsClaudeCode) carry
// claudeMD as the first text part of their first user message, unless they carry a CLAUDE.md
// block of their own; srv counts its tokens.
func prepare(ctx context.Context, srv *service.Server, f corpus.File, claudeMD string) session {
	s := session{name: f.Name, kind: agentKind(f.Name), task: -1}
	lifted, err := measure.Lift(f.Path)
	if err != nil {
		s.err = err
		return s
	}
	msgs := lifted.GetMessages()
	plain := msgs
	if measure.IsClaudeCode(f.Name, lifted.GetProvider(), msgs) {
		s.kind = kindClaudeCode
		var own bool
		if s.block, plain, own = measure.OwnClaudeMD(msgs); !own {
			s.block, msgs = claudeMD, measure.WithClaudeMD(msgs, claudeMD)
		}
		s.blockLines = fidelity.Lines(s.block)
	}
	s.msgs = msgs
	s.requests = fidelity.Requests(plain)
	if first := engine.Requests(plain); len(first) > 0 && len(s.requests) > 0 && s.requests[0].Index == first[0] {
		s.task = 0
	}
	plan, err := srv.Plan(ctx, &compactorv1.PlanRequest{Messages: msgs, Policy: &compactorv1.Policy{ContextWindow: countWindow}})
	if err != nil {
		s.err = err
		return s
	}
	s.tokens = plan.GetTokensBefore()
	return s
}

// window is the context window of a replay at ratio of the session's tokens.
func (s *session) window(ratio float64) int64 {
	return max(minWindow, int64(ratio*float64(s.tokens)))
}

package engine

import (
	"testing"

	"github.com/compactord/compactord/internal/corpus"
)

// TestUserKindsPerAgent reads one real conversation of each agent kind with the rules of
// agent talk: how many of its user messages are the user's requests, tool output posing as
// user turns, and few-shot demonstrations, and which is the task.
func TestUserKindsPerAgent(t *testing.T) {
	tests := []struct {
		agent, file                   string
		requests, observations, demos int
		task                          int // the index of the first request
	}{
		// SWE-agent without function calling: a demonstration, then the task; its outputs end
		// with the prompt state line "(Current directory: …) bash-$".
		{"SWE-agent", "sweagent-testrepo-i1.openai.json", 1, 4, 1, 2},
		{"SWE-agent, text protocol", "sweagent-ctf-rev-rock.openai.json", 1, 11, 0, 1},
		// SWE-agent with function calling: outputs are tool results, not user messages.
		{"SWE-agent, function calling", "sweagent-marshmallow-1867-fc-replace-from-source.openai.json", 1, 0, 0, 1},
		// mini-swe-agent: the task, then "<returncode>" observations and the final diff that
		// answers its submit command.
		{"mini-swe-agent", "minisweagent-gemini3-django__django-11141.openai.json", 1, 39, 0, 1},
		// tau-bench: a customer talking to the agent, every user turn a request.
		{"tau-bench", "taubench-airline-t32-r3.openai.json", 8, 0, 0, 1},
		// Claude Code: the user's prompts; tool results travel in user messages of their own,
		// and so does a Stop hook's feedback (message 68), which is the host's, not a request.
		{"Claude Code", "claudecode-python-to-rust-port-ed152cd4.anthropic.json", 1, 0, 0, 0},
		{"Claude Code after its own compaction", "claudetrace-req64-post-compact.anthropic.json", 2, 0, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.agent, func(t *testing.T) {
			msgs := readCorpusFile(t, corpus.Named(t, tt.file))
			n := map[UserKind]int{}
			task := -1
			for i, k := range ClassifyUsers(msgs, false) {
				n[k]++
				if k == UserRequest && task < 0 {
					task = i
				}
			}
			if n[UserRequest] != tt.requests || n[UserObservation] != tt.observations || n[UserDemonstration] != tt.demos || task != tt.task {
				t.Errorf("%s: %d requests (task at %d), %d observations, %d demonstrations; want %d (%d), %d, %d",
					tt.file, n[UserRequest], task, n[UserObservation], n[UserDemonstration], tt.requests, tt.task, tt.observations, tt.demos)
			}
			if got := Requests(msgs); len(got) != tt.requests {
				t.Errorf("Requests: %d, want %d", len(got), tt.requests)
			}
		})
	}
}

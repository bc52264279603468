package summarize

import (
	"encoding/json"
	"strings"

	"github.com/compactord/compactord/internal/clip"
)

// The agent's plan: coding agents keep a todo list or plan through a tool (Claude Code's
// TodoWrite, Codex's update_plan), each call replacing the whole list. The latest list is
// what the next turn works from, so the summary keeps it in full.

// todoStepBytes caps one step of a plan.
const todoStepBytes = 300

// todoItems returns the steps of a plan-keeping call, read from its arguments args alone (the
// tool's name does not matter), as "[status] step" lines, or nil when the call is not one: an
// argument "todos" (objects with content and status) or "plan" (objects with step and status).
func todoItems(args map[string]json.RawMessage) []string {
	for _, key := range []string{"todos", "plan"} {
		raw, ok := args[key]
		if !ok {
			continue
		}
		var steps []map[string]any
		if json.Unmarshal(raw, &steps) != nil || len(steps) == 0 {
			continue
		}
		var out []string
		for _, st := range steps {
			text := firstString(st, "content", "step", "title", "description")
			if text == "" {
				continue
			}
			status := firstString(st, "status", "state")
			if status == "" {
				status = "pending"
			}
			out = append(out, "- ["+status+"] "+oneLine(clip.Prefix(text, todoStepBytes)))
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

func firstString(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

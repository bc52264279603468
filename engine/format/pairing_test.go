package format

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// checkPairing checks the pairing rules the providers enforce beyond the types: every tool
// call is answered in the turn that follows it and every answer follows its call (Anthropic
// tool_use/tool_result and Bedrock toolUse/toolResult: in the next message; OpenAI Chat: by
// tool messages before the next other message; Responses: by a later function_call_output;
// Gemini: in the next content), and an Anthropic server_tool_use has its result in its own
// message. Calls in the body's last message are awaiting their answer and pass.
func checkPairing(p compactorv1.Provider, body string) error {
	var top struct {
		Messages []map[string]json.RawMessage `json:"messages"`
		Input    []map[string]json.RawMessage `json:"input"`
		Contents []struct {
			Parts []map[string]json.RawMessage `json:"parts"`
		} `json:"contents"`
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		return err
	}
	var err error
	switch p { // only the format's own conversation member: base_body may hold others
	case compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:
		err = json.Unmarshal(raw["input"], &top.Input)
	case compactorv1.Provider_PROVIDER_GEMINI:
		err = json.Unmarshal(raw["contents"], &top.Contents)
	default:
		err = json.Unmarshal(raw["messages"], &top.Messages)
	}
	if err != nil {
		return err
	}
	str := func(r json.RawMessage) string {
		var s string
		_ = json.Unmarshal(r, &s)
		return s
	}
	blocks := func(r json.RawMessage) []map[string]json.RawMessage {
		var b []map[string]json.RawMessage
		_ = json.Unmarshal(r, &b)
		return b
	}
	// calls and answers per message, then matched message to next message.
	var calls, answers [][]string
	switch p {
	case compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES, compactorv1.Provider_PROVIDER_BEDROCK_CONVERSE:
		for i, m := range top.Messages {
			var c, a, server []string
			for _, b := range blocks(m["content"]) {
				typ := str(b["type"])
				switch {
				case typ == "tool_use":
					c = append(c, str(b["id"]))
				case typ == "tool_result":
					a = append(a, str(b["tool_use_id"]))
				case typ == "server_tool_use":
					server = append(server, str(b["id"]))
				case strings.HasSuffix(typ, "_tool_result"):
					server = remove(server, str(b["tool_use_id"]))
				case b["toolUse"] != nil:
					var u struct{ ToolUseID string }
					_ = json.Unmarshal(b["toolUse"], &u)
					c = append(c, u.ToolUseID)
				case b["toolResult"] != nil:
					var r struct{ ToolUseID string }
					_ = json.Unmarshal(b["toolResult"], &r)
					a = append(a, r.ToolUseID)
				}
			}
			if len(server) > 0 && i < len(top.Messages)-1 {
				return fmt.Errorf("messages[%d]: server tool call %s without its result", i, server[0])
			}
			calls, answers = append(calls, c), append(answers, a)
		}
	case compactorv1.Provider_PROVIDER_OPENAI_CHAT:
		var open []string // the calls of the last assistant message not answered yet
		for i, m := range top.Messages {
			if str(m["role"]) == "tool" {
				id := str(m["tool_call_id"])
				if !contains(open, id) {
					return fmt.Errorf("messages[%d]: answer %s to no open call", i, id)
				}
				open = remove(open, id)
				continue
			}
			if len(open) > 0 {
				return fmt.Errorf("messages[%d]: call %s is not answered before it", i, open[0])
			}
			var tcs []struct{ ID string }
			_ = json.Unmarshal(m["tool_calls"], &tcs)
			for _, tc := range tcs {
				open = append(open, tc.ID)
			}
		}
		return nil
	case compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:
		open := map[string]bool{}
		for i, it := range top.Input {
			switch str(it["type"]) {
			case "function_call":
				open[str(it["call_id"])] = true
			case "function_call_output":
				if !open[str(it["call_id"])] {
					return fmt.Errorf("input[%d]: output for call %s with no call before it", i, str(it["call_id"]))
				}
				delete(open, str(it["call_id"]))
			case "message":
				if len(open) > 0 && str(it["role"]) == "user" {
					return fmt.Errorf("input[%d]: a user message while calls are unanswered", i)
				}
			}
		}
		return nil
	case compactorv1.Provider_PROVIDER_GEMINI:
		for _, c := range top.Contents {
			var cs, as []string
			for _, part := range c.Parts {
				if fc := part["functionCall"]; fc != nil {
					var f struct{ ID, Name string }
					_ = json.Unmarshal(fc, &f)
					cs = append(cs, f.ID+"/"+f.Name)
				}
				if fr := part["functionResponse"]; fr != nil {
					var f struct{ ID, Name string }
					_ = json.Unmarshal(fr, &f)
					as = append(as, f.ID+"/"+f.Name)
				}
			}
			calls, answers = append(calls, cs), append(answers, as)
		}
	}
	for i := range calls {
		var next []string
		if i+1 < len(answers) {
			next = answers[i+1]
		} else if len(calls[i]) > 0 {
			continue // the last message: awaiting its answers
		}
		for _, id := range calls[i] {
			if !contains(next, id) {
				return fmt.Errorf("message %d: call %s is not answered in the next turn", i, id)
			}
			next = remove(next, id)
		}
		if i+1 < len(answers) && len(next) > 0 {
			return fmt.Errorf("message %d: answer %s to no call of the turn before", i+1, next[0])
		}
	}
	if len(answers) > 0 && len(answers[0]) > 0 {
		return fmt.Errorf("message 0: answer %s to no call", answers[0][0])
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func remove(list []string, s string) []string {
	for i, x := range list {
		if x == s {
			return append(list[:i:i], list[i+1:]...)
		}
	}
	return list
}

// TestPairingCheckerRejects makes sure the pairing check can fail.
func TestPairingCheckerRejects(t *testing.T) {
	bad := []struct {
		p    compactorv1.Provider
		body string
	}{
		{pA, `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"n","input":{}}]},{"role":"user","content":[{"type":"text","text":"x"}]}]}`},
		{pA, `{"messages":[{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]},{"role":"user","content":[{"type":"text","text":"x"}]}]}`},
		{pB, `{"messages":[{"role":"user","content":[{"toolResult":{"toolUseId":"a","content":[]}}]}]}`},
		{pC, `{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"n","arguments":"{}"}}]},{"role":"user","content":"x"}]}`},
		{pR, `{"input":[{"type":"function_call_output","call_id":"a","output":"x"}]}`},
		{pG, `{"contents":[{"role":"model","parts":[{"functionCall":{"id":"a","name":"n"}}]},{"role":"user","parts":[{"text":"x"}]}]}`},
	}
	for i, b := range bad {
		if checkPairing(b.p, b.body) == nil {
			t.Errorf("case %d (%s): pairing check accepted %s", i, ProviderName(b.p), b.body)
		}
	}
}

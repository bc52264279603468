package fidelity

import (
	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"google.golang.org/protobuf/proto"
)

// The two baselines continuation recall compares compaction with. Each fits a conversation
// into a token budget without a summary; count measures one message with the same tokenizer
// as the compaction it is compared with.

// MaskedOutput is the placeholder ObservationMasking puts where a tool output was.
const MaskedOutput = "[old tool output omitted]"

// Truncation keeps the head (system messages, prefaces, pinned), the first user message (the
// task) and the newest messages that fit budget with them, dropping the middle of the
// conversation.
func Truncation(msgs []*compactorv1.Message, budget int64, count func(*compactorv1.Message) int64) []*compactorv1.Message {
	keep := make([]bool, len(msgs))
	var used int64
	task := -1
	for i, m := range msgs {
		if engine.InHead(m) || task < 0 && m.GetRole() == compactorv1.Role_ROLE_USER {
			if !engine.InHead(m) {
				task = i
			}
			keep[i] = true
			used += count(m)
		}
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if keep[i] {
			continue
		}
		n := count(msgs[i])
		if used+n > budget {
			break
		}
		keep[i] = true
		used += n
	}
	return kept(msgs, keep)
}

// ObservationMasking (Lindenbauer et al., "The Complexity Trap", arXiv 2508.21433) replaces
// the oldest tool outputs by MaskedOutput, one at a time, until the conversation fits
// budget, and keeps everything else: the agent's reasoning and actions stay. Tool outputs
// are tool results and the observations text-protocol agents send as user messages, as
// compaction itself tells them (engine.ClassifyUsers). When even every output masked does not fit, the oldest messages
// after the head and the task are dropped until it does.
func ObservationMasking(msgs []*compactorv1.Message, budget int64, count func(*compactorv1.Message) int64) []*compactorv1.Message {
	out := make([]*compactorv1.Message, len(msgs))
	sizes := make([]int64, len(msgs))
	var used int64
	for i, m := range msgs {
		out[i] = m
		sizes[i] = count(m)
		used += sizes[i]
	}
	kinds := engine.ClassifyUsers(msgs, false)
	for i, m := range msgs {
		if used <= budget {
			break
		}
		masked, ok := maskOutputs(m, kinds[i] == engine.UserObservation)
		if !ok {
			continue
		}
		out[i] = masked
		n := count(masked)
		used += n - sizes[i]
		sizes[i] = n
	}
	keep := make([]bool, len(out))
	task := -1
	for i, m := range out {
		keep[i] = true
		if task < 0 && !engine.InHead(m) && m.GetRole() == compactorv1.Role_ROLE_USER {
			task = i
		}
	}
	for i, m := range out {
		if used <= budget {
			break
		}
		if engine.InHead(m) || i == task {
			continue
		}
		keep[i] = false
		used -= sizes[i]
	}
	return kept(out, keep)
}

// maskOutputs returns m with its tool outputs replaced by MaskedOutput (all of it when it is
// an observation), or false when m has none.
func maskOutputs(m *compactorv1.Message, observation bool) (*compactorv1.Message, bool) {
	if observation {
		c := proto.Clone(m).(*compactorv1.Message)
		c.Parts = []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: MaskedOutput}}}}
		return c, true
	}
	var c *compactorv1.Message
	for j, p := range m.GetParts() {
		if p.GetToolResult() == nil {
			continue
		}
		if c == nil {
			c = proto.Clone(m).(*compactorv1.Message)
		}
		c.Parts[j].GetToolResult().Output = &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: MaskedOutput}}
	}
	return c, c != nil
}

func kept(msgs []*compactorv1.Message, keep []bool) []*compactorv1.Message {
	var out []*compactorv1.Message
	for i, m := range msgs {
		if keep[i] {
			out = append(out, m)
		}
	}
	return out
}

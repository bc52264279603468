package format

import (
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

// SystemContextPrefix starts the user message that carries a DYNAMIC system message to a
// session-stateful back end (and, on request, to Anthropic in place).
const SystemContextPrefix = "[System Context]: "

// selectMessages returns the messages Lower sends, with their request indexes, and the cursor
// to report.
//
// Without KeepHistory, only what engine.Sent marks is considered. With an active session and
// a cursor c with 0 <= c < len(messages), the result is every DYNAMIC system message at or
// before c (as a "[System Context]: " user message, in order) followed by the messages after c
// (DYNAMIC system ones converted the same way); the cursor returned is the index of the last
// message included, never less than c. Otherwise all considered messages are sent and the
// cursor is the index of the last message.
func selectMessages(req *compactorv1.LowerRequest) ([]src, int32) {
	msgs := req.GetMessages()
	var sent []bool
	if !req.GetKeepHistory() {
		sent = engine.Sent(msgs)
	}
	cursor := int32(len(msgs) - 1)
	s := req.GetSession()
	delta := s.GetActive() && s.GetCursor() >= 0 && int(s.GetCursor()) < len(msgs)
	out := make([]src, 0, len(msgs))
	if !delta {
		for i, m := range msgs {
			if sent == nil || sent[i] {
				out = append(out, src{i, m})
			}
		}
		return out, cursor
	}
	c := int(s.GetCursor())
	last := c
	for i, m := range msgs {
		if sent != nil && !sent[i] {
			continue
		}
		dynamic := m.GetRole() == compactorv1.Role_ROLE_SYSTEM && m.GetLifecycle() == compactorv1.Lifecycle_LIFECYCLE_DYNAMIC
		switch {
		case dynamic:
			out = append(out, src{i, systemContext(m)})
		case i > c:
			out = append(out, src{i, m})
		default:
			continue
		}
		if i > last {
			last = i
		}
	}
	return out, int32(last)
}

// systemContext renders a system message as the user message "[System Context]: <text>".
func systemContext(m *compactorv1.Message) *compactorv1.Message {
	var b strings.Builder
	b.WriteString(SystemContextPrefix)
	n := 0
	for _, p := range m.GetParts() {
		if t, ok := textOf(p); ok {
			if n > 0 {
				b.WriteString("\n\n")
			}
			b.WriteString(t)
			n++
		}
	}
	return &compactorv1.Message{
		Id:              m.GetId(),
		Role:            compactorv1.Role_ROLE_USER,
		Parts:           []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: b.String()}}}},
		ProviderOptions: m.GetProviderOptions(),
	}
}

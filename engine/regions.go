package engine

import compactorv1 "github.com/compactord/compactord/api/compactor/v1"

// LatestSummary returns the index of the last COMPACT_SUMMARY message, or -1.
func LatestSummary(msgs []*compactorv1.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].GetKind() == compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
			return i
		}
	}
	return -1
}

// InHead reports whether m belongs to the head of a conversation: system messages, session
// prefaces and pinned messages, which are never summarized or pruned and always sent.
func InHead(m *compactorv1.Message) bool {
	return m.GetRole() == compactorv1.Role_ROLE_SYSTEM ||
		m.GetKind() == compactorv1.MessageKind_MESSAGE_KIND_SESSION_PREFACE ||
		m.GetPinned()
}

// Sent reports, for each message, whether a model sees it: compaction prompts never; before
// the latest summary only head messages; the latest summary and everything after it always.
// The result has one entry per message.
func Sent(msgs []*compactorv1.Message) []bool {
	sent := make([]bool, len(msgs))
	last := LatestSummary(msgs)
	for i, m := range msgs {
		switch {
		case m.GetKind() == compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT:
		case i >= last:
			sent[i] = true
		default:
			sent[i] = InHead(m)
		}
	}
	return sent
}

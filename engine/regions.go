package engine

import (
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// The providers a compactorv1.ProviderPart can belong to.
const (
	ProviderAnthropic = "anthropic" // Anthropic Messages
	ProviderOpenAI    = "openai"    // OpenAI Responses
)

// LatestSummary returns the index of the last summary boundary, or -1: a COMPACT_SUMMARY
// message, or a message holding a compaction a provider made (see ProviderCompaction).
func LatestSummary(msgs []*compactorv1.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].GetKind() == compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY || ProviderCompaction(msgs[i]) {
			return i
		}
	}
	return -1
}

// ProviderCompaction reports whether m holds a compaction a provider made (a ProviderPart of
// type "compaction"). Such a message is a summary boundary whose content compactord cannot
// read: what precedes it is history the provider already folded into it, and it is kept
// verbatim like a head message, never summarized again.
func ProviderCompaction(m *compactorv1.Message) bool {
	for _, p := range m.GetParts() {
		if p.GetProvider().GetType() == "compaction" {
			return true
		}
	}
	return false
}

// replacedCompactionInto ends the line that opens the text a provider compaction is replaced
// by when the target provider cannot take it (ReplacedCompactionText).
const replacedCompactionInto = " compacted the conversation before this point into:]\n"

// ReplacedCompactionText is the text that stands for a compaction provider made, of which
// summary is the readable summary, where the target provider cannot take the compaction
// itself.
func ReplacedCompactionText(provider, summary string) string {
	return "[" + provider + replacedCompactionInto + summary
}

// ReplacedCompaction returns the summary a text of ReplacedCompactionText carries.
func ReplacedCompaction(text string) (summary string, ok bool) {
	if !strings.HasPrefix(text, "[") {
		return "", false
	}
	head, rest, ok := strings.Cut(text, replacedCompactionInto)
	if !ok || strings.ContainsAny(head, "\n]") {
		return "", false
	}
	return rest, true
}

// InHead reports whether m belongs to the head of a conversation: system messages, session
// prefaces, pinned messages, provider compactions and user messages of standing instructions
// only (StandingPart: a host's CLAUDE.md or AGENTS.md context), which are never summarized or
// pruned and always sent.
func InHead(m *compactorv1.Message) bool {
	return m.GetRole() == compactorv1.Role_ROLE_SYSTEM ||
		m.GetKind() == compactorv1.MessageKind_MESSAGE_KIND_SESSION_PREFACE ||
		m.GetPinned() || ProviderCompaction(m) || standingOnly(m)
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

// msgClass is the region a message belongs to.
type msgClass uint8

const (
	// classDrop: not sent; history covered by the latest summary, or a compaction prompt.
	classDrop msgClass = iota
	// classHead: system messages, session prefaces and pinned messages, wherever they are.
	classHead
	// classSummary: the latest COMPACT_SUMMARY.
	classSummary
	// classActive: the messages after the latest summary that are neither head nor prompts.
	classActive
)

// classify returns the region of message m, at index i of a conversation whose latest
// summary is at index summary (-1: none).
func classify(m *compactorv1.Message, i, summary int) msgClass {
	switch {
	case m.GetKind() == compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT:
		return classDrop
	case InHead(m):
		return classHead
	case i == summary:
		return classSummary
	case i > summary:
		return classActive
	}
	return classDrop
}

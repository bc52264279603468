package measure

import (
	"fmt"
	"path/filepath"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/corpus"
	"google.golang.org/protobuf/proto"
)

// ClaudeTrace names the real Claude Code request (captured by claude-trace) in the repository's
// corpus whose first user message opens with the CLAUDE.md block Claude Code sends.
const ClaudeTrace = "claudetrace-req64-post-compact.anthropic.json"

// The CLAUDE.md block Claude Code puts first in a session's first user message: a
// <system-reminder> text part that names the CLAUDE.md context.
const (
	reminderOpen  = "<system-reminder>"
	reminderClose = "</system-reminder>"
	claudeMDMark  = "# claudeMd"
)

// Claude Code conversations, by the corpus's file names (internal/corpus/testdata/real/MANIFEST.md):
// session transcripts and captured requests.
var claudeCodePrefixes = []string{"claudecode-", "claudetrace-"}

// ClaudeMD returns the CLAUDE.md block of the real Claude Code request in the
// repository's own corpus (ClaudeTrace): the first text part of its first user message.
func ClaudeMD() (string, error) {
	dir, err := corpus.FixtureDir()
	if err != nil {
		return "", err
	}
	lifted, err := Lift(filepath.Join(dir, "real", ClaudeTrace))
	if err != nil {
		return "", fmt.Errorf("the CLAUDE.md block: %w", err)
	}
	if block, _, ok := OwnClaudeMD(lifted.GetMessages()); ok {
		return block, nil
	}
	return "", fmt.Errorf("the CLAUDE.md block: the first user message of %s does not open with a %s block naming %q", ClaudeTrace, reminderOpen, claudeMDMark)
}

// isClaudeMD reports whether text is a CLAUDE.md block as Claude Code writes it.
func isClaudeMD(text string) bool {
	return strings.HasPrefix(text, reminderOpen) && strings.Contains(text, claudeMDMark) &&
		strings.HasSuffix(strings.TrimSpace(text), reminderClose)
}

// FirstUser returns the index of the first user message of msgs, or -1.
func FirstUser(msgs []*compactorv1.Message) int {
	for i, m := range msgs {
		if m.GetRole() == compactorv1.Role_ROLE_USER {
			return i
		}
	}
	return -1
}

// OwnClaudeMD returns the CLAUDE.md block msgs already carry (the first text part of the first
// user message, when it is one) and msgs without it (that message copied).
func OwnClaudeMD(msgs []*compactorv1.Message) (block string, without []*compactorv1.Message, ok bool) {
	u := FirstUser(msgs)
	if u < 0 {
		return "", msgs, false
	}
	parts := msgs[u].GetParts()
	for k, p := range parts {
		t := p.GetText()
		if t == nil {
			continue
		}
		if !isClaudeMD(t.GetText()) {
			return "", msgs, false
		}
		m := proto.Clone(msgs[u]).(*compactorv1.Message)
		m.Parts = append(append([]*compactorv1.Part{}, parts[:k]...), parts[k+1:]...)
		out := append([]*compactorv1.Message{}, msgs...)
		out[u] = m
		return t.GetText(), out, true
	}
	return "", msgs, false
}

// IsClaudeCode is the rule that says which conversations are Claude Code's: an Anthropic
// Messages body that is named as one (claudeCodePrefixes) or whose first user message
// already opens with a CLAUDE.md block (a captured Claude Code request).
func IsClaudeCode(name string, provider compactorv1.Provider, msgs []*compactorv1.Message) bool {
	if provider != compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES {
		return false
	}
	for _, p := range claudeCodePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	_, _, ok := OwnClaudeMD(msgs)
	return ok
}

// WithClaudeMD returns msgs with block inserted as the first text part of the first user
// message, where Claude Code puts it (msgs is not modified: that message is copied).
func WithClaudeMD(msgs []*compactorv1.Message, block string) []*compactorv1.Message {
	u := FirstUser(msgs)
	if u < 0 {
		return msgs
	}
	m := proto.Clone(msgs[u]).(*compactorv1.Message)
	part := &compactorv1.Part{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: block}}}
	m.Parts = append([]*compactorv1.Part{part}, m.GetParts()...)
	out := append([]*compactorv1.Message{}, msgs...)
	out[u] = m
	return out
}

package summarize

import (
	"slices"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/clip"
)

func TestFences(t *testing.T) {
	long := strings.Repeat("x", codeBytes+50)
	for _, tc := range []struct {
		name, in, shortened, without string
	}{
		{"no fence", "plain text", "plain text", "plain text"},
		{"a closed block", "before ```go\nfmt.Println()\n``` after", "before ```go\nfmt.Println()\n``` after", "before  after"},
		{"a long block", "a ```" + long + "``` b", "a " + clip.Prefix("```"+long, codeBytes) + "``` b", "a  b"},
		{"an unclosed block", "see ```sh\nls", "see ```sh\nls", "see "},
		{"all code", "```\ncode\n```", "```\ncode\n```", "```\ncode\n```"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := shortenFences(tc.in); got != tc.shortened {
				t.Errorf("shortenFences = %q, want %q", got, tc.shortened)
			}
			if got := withoutFences(tc.in); got != tc.without {
				t.Errorf("withoutFences = %q, want %q", got, tc.without)
			}
		})
	}
}

// TestCommandBlocks: the commands of an assistant text are its shell blocks, else (when an
// observation answers it) its last block without a language; fences pair in order, so a
// closing fence never opens a block of prose.
func TestCommandBlocks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string
		observed bool
		want     []string
	}{
		{"shell blocks", "run\n```bash\nls -la\n```\nand\n```sh\npwd\n```", true, []string{"ls -la", "pwd"}},
		{"a bare block, observed", "Let me look.\n```\nopen src/x.py\n```", true, []string{"open src/x.py"}},
		{"a bare block, not observed", "Let me look.\n```\nopen src/x.py\n```", false, nil},
		{"the last bare block", "```\nls\n```\nthen\n```\nfind . -name x\n```", true, []string{"find . -name x"}},
		{"prose between a code block and a command", "```python\nprint(1)\n```\nthen run\n```\nls -la\n```", true, []string{"ls -la"}},
		{"only a language block", "```python\nprint(1)\n```\nthen run it", true, nil},
		{"unclosed", "```\nls", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := commandBlocks(tc.in, tc.observed); !slices.Equal(got, tc.want) {
				t.Errorf("commandBlocks = %q, want %q", got, tc.want)
			}
		})
	}
}

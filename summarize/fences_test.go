package summarize

import (
	"strings"
	"testing"
)

func TestFences(t *testing.T) {
	long := strings.Repeat("x", codeBytes+50)
	for _, tc := range []struct {
		name, in, shortened, without string
	}{
		{"no fence", "plain text", "plain text", "plain text"},
		{"a closed block", "before ```go\nfmt.Println()\n``` after", "before ```go\nfmt.Println()\n``` after", "before  after"},
		{"a long block", "a ```" + long + "``` b", "a " + truncateBytes("```"+long, codeBytes) + "``` b", "a  b"},
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

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/certtest"
	"github.com/compactord/compactord/internal/corpus"
)

// maxFitInput bounds the corpus files TestSmallestWindow plans, in bytes.
const maxFitInput = 150 << 10

// TestSmallestWindow: the window an irreducible error states is the smallest that fits. Over
// the corpus at windows it does not fit, planning at the stated window succeeds and at one
// token less fails again: with the default reply reserve (a share of the window), with a
// reserve the --policy file sets, and without a window (--trigger-tokens).
func TestSmallestWindow(t *testing.T) {
	reserve := filepath.Join(t.TempDir(), "reserve.json")
	certtest.WriteFile(t, reserve, []byte(`{"reserveOutputTokens": "150"}`))
	modes := []struct {
		name   string
		flag   string   // the flag whose value the hint states
		limits []int    // its values to try
		extra  []string // other flags
	}{
		{"default reserve", "--context-window", []int{300, 1200, 5000}, nil},
		{"reserve set", "--context-window", []int{400, 1500}, []string{"--policy", reserve}},
		{"trigger only", "--trigger-tokens", []int{250, 1000}, nil},
	}
	checked := map[string]int{}
	for _, f := range corpus.Files(t) {
		if st, err := os.Stat(f.Path); err != nil || st.Size() > maxFitInput {
			continue // the largest take seconds each under -race; their floors are no different
		}
		for _, m := range modes {
			stated := regexp.MustCompile(regexp.QuoteMeta(m.flag) + ` (\d+)`)
			plan := func(limit int) result {
				return ctl(t, nil, "", append([]string{"--local", "plan", m.flag, strconv.Itoa(limit), f.Path}, m.extra...)...)
			}
			for _, limit := range m.limits {
				r := plan(limit)
				if r.code != exitUnfit || !strings.Contains(r.stderr, "irreducible") {
					continue
				}
				got := stated.FindStringSubmatch(r.stderr[strings.Index(r.stderr, "\n"):])
				if got == nil {
					t.Errorf("%s, %s %d: the irreducible error states no %s:\n%s", f.Name, m.flag, limit, m.flag, r.stderr)
					continue
				}
				least, _ := strconv.Atoi(got[1])
				if fits := plan(least); fits.code != exitOK {
					t.Errorf("%s (%s): at the stated %s %d: exit %d\n%s", f.Name, m.name, m.flag, least, fits.code, fits.stderr)
				}
				if less := plan(least - 1); less.code != exitUnfit || !strings.Contains(less.stderr, "irreducible") {
					t.Errorf("%s (%s): %s %d, one less than stated, fits: the stated one is not the smallest", f.Name, m.name, m.flag, least-1)
				}
				checked[m.name]++
			}
		}
	}
	t.Logf("irreducible cases checked: %v", checked)
	for _, m := range modes {
		if checked[m.name] < 5 {
			t.Errorf("%s: only %d irreducible cases checked; the windows tried no longer make the corpus irreducible", m.name, checked[m.name])
		}
	}
}

package fidelity

import "testing"

func TestBareNameRuns(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int // bytes in runs
	}{
		{"- src/a.py: read (saw parse_args, Config.load, MAX_SIZE, src/b.py)", len("parse_args, Config.load, MAX_SIZE, src/b.py)")},
		{"- named, not opened: /bin/bash, x/y.go, a/b.go, c/d.go [m3–9]", len("/bin/bash, x/y.go, a/b.go, c/d.go")},
		{"- lines 510, 514, 640, 641", len("510, 514, 640, 641")},
		{"- src/a.py: edited parse_args, then ran tests/test_a.py → ok [m4]", 0},
		{"- three names: a_b, c_d, e_f", 0},
		{"- edited a_b and c_d, e_f, g_h", 0},
		{"", 0},
	} {
		if got, total := BareNameRuns(tc.text); got != tc.want || total != len(tc.text) {
			t.Errorf("BareNameRuns(%q) = %d, %d; want %d, %d", tc.text, got, total, tc.want, len(tc.text))
		}
	}
}

package bytesize

import "testing"

// TestString: sizes print with the largest unit that divides them, and what they print
// parses back.
func TestString(t *testing.T) {
	for _, tt := range []struct {
		n    Size
		want string
	}{{64 << 20, "64MiB"}, {16 << 20, "16MiB"}, {1 << 30, "1GiB"}, {1536, "1536"}, {3 << 10, "3KiB"}, {1000, "1000"}, {0, "0"}, {3 << 29, "1536MiB"}} {
		if got := tt.n.String(); got != tt.want {
			t.Errorf("%d prints %q, want %q", int64(tt.n), got, tt.want)
		}
		var back Size
		if err := back.Set(tt.n.String()); err != nil || back != tt.n {
			t.Errorf("%q parses to %d, %v; want %d", tt.n.String(), back, err, tt.n)
		}
	}
}

func TestSet(t *testing.T) {
	for in, want := range map[string]Size{"16777216": 16 << 20, "16MiB": 16 << 20, "512 KiB": 512 << 10, "2GiB": 2 << 30, "0": 0} {
		var s Size
		if err := s.Set(in); err != nil || s != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, s, err, want)
		}
	}
	for _, in := range []string{"", "lots", "-1", "1.5MiB", "16MB", "9999999999GiB"} {
		var s Size
		if err := s.Set(in); err == nil {
			t.Errorf("Set(%q) = %d, want an error", in, s)
		}
	}
}

func TestHuman(t *testing.T) {
	for n, want := range map[Size]string{40005805: "38.2 MiB", 16 << 20: "16.0 MiB", 512: "512 B", 1536: "1.5 KiB"} {
		if got := n.Human(); got != want {
			t.Errorf("%d.Human() = %q, want %q", int64(n), got, want)
		}
	}
}

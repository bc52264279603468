package uninit

import "testing"

func TestBytesHasRoomForN(t *testing.T) {
	for _, n := range []int{0, 1, 7, 4096, 100_000} {
		b := Bytes(n)
		if len(b) != 0 || cap(b) < n {
			t.Fatalf("Bytes(%d): len %d, cap %d", n, len(b), cap(b))
		}
		if n == 0 {
			continue
		}
		p := &b[:1][0]
		for i := range n {
			b = append(b, byte(i))
		}
		if &b[0] != p {
			t.Fatalf("Bytes(%d): appending %d bytes reallocated", n, n)
		}
		for i, c := range b {
			if c != byte(i) {
				t.Fatalf("Bytes(%d)[%d] = %d, want %d", n, i, c, byte(i))
			}
		}
	}
}

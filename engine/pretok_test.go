package engine

import "testing"

// BenchmarkPretokenizeLargest is the pre-tokenizer alone: every string of the largest corpus
// conversation split into pieces by the o200k_base pre-tokenizer, with no merging.
func BenchmarkPretokenizeLargest(b *testing.B) {
	strs, n := texts(largest(b))
	enc, err := encoder(tokO200k)
	if err != nil {
		b.Fatal(err)
	}
	pieces := 0
	b.SetBytes(n)
	loopCPU(b, func() {
		for _, s := range strs {
			enc.eachPiece(s, func(string) { pieces++ })
		}
	})
	if pieces == 0 {
		b.Fatal("no pieces")
	}
}

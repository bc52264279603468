package fidelity

import compactorv1 "github.com/compactord/compactord/api/compactor/v1"

// Fidelity is what a compacted conversation kept of the range its summary replaced.
type Fidelity struct {
	// Requests is the mean, over the range's requests, of the share of each request's lines
	// found verbatim (whitespace-normalised) in the compacted conversation; NumRequests is
	// how many there were (Requests is 1 when there were none).
	Requests    float64
	NumRequests int
	// Paths is the share of the range's agent-named paths found in the compacted
	// conversation (1 when there were none); NumPaths is how many there were.
	Paths    float64
	NumPaths int
}

// Measure measures what compacted (summary message and kept messages) kept of rng, the
// summarized range, with the rules Check enforces (the head compacted keeps may hold the
// task: RangeRequests).
func Measure(rng, compacted []*compactorv1.Message) Fidelity {
	hay := NewHaystack(nil, compacted)
	reqs := RangeRequests(rng, compacted)
	paths := Paths(rng, reqs)
	f := Fidelity{Requests: 1, Paths: 1, NumRequests: len(reqs), NumPaths: len(paths)}
	if len(reqs) > 0 {
		sum := 0.0
		for _, r := range reqs {
			found := 0
			for _, l := range r.Lines {
				if hay.Has(l) {
					found++
				}
			}
			sum += float64(found) / float64(len(r.Lines))
		}
		f.Requests = sum / float64(len(reqs))
	}
	if len(paths) > 0 {
		found := 0
		for _, p := range paths {
			if hay.Has(p) {
				found++
			}
		}
		f.Paths = float64(found) / float64(len(paths))
	}
	return f
}

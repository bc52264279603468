package engine

import "strings"

// IsObservation is the observation rule over one user text, for the external tests: the
// engine applies it through ClassifyUsers, which reads a message's parts.
func IsObservation(text string) bool {
	text = strings.TrimSpace(text)
	return observed(text, text, strings.Contains(text, promptStateDir))
}

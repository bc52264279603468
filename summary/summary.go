// Package summary is what a summary is once written, in the one shape every part of
// compactord uses: what its summarizer produced (Output) and what the summary check found
// (Check). The summarizers (package summarize) produce an Output, the check (package
// fidelity) reports a Check, the cache (package cache) stores both with what the summary
// covers, and Compact (package service) derives from them the API's Summary, the span
// attributes and the metrics.
//
// The package imports nothing, so that none of those packages imports another for these
// types: the cache stays free of the summarizers and of the engine.
//
// The JSON names are the form in which the cache stores a summary (cache/redis.go): entries
// written by every earlier version are read back by these names, so a name never changes.
package summary

// Output is a summary as its summarizer wrote it, and what writing it cost.
type Output struct {
	// Text is the summary (the body of the COMPACT_SUMMARY message), trimmed; never empty.
	Text string `json:"text"`
	// Model is the model that wrote it, as its provider reported it; "extractive" for the
	// extractive summarizer, the model its cache fingerprint names.
	Model string `json:"model,omitempty"`
	// PromptVersion is the version of the summary prompt it was written with
	// (engine.PromptVersion).
	PromptVersion string `json:"prompt_version,omitempty"`
	// InputTokens and OutputTokens are the usage of the call that wrote it, as its provider
	// reported it (estimates for the extractive summarizer). InputTokens counts every input
	// token, those read from and written to the provider's prompt cache included.
	InputTokens  int64 `json:"input_tokens,omitempty"`
	OutputTokens int64 `json:"output_tokens,omitempty"`
	// CacheReadTokens and CacheWriteTokens are the input tokens of InputTokens the provider
	// read from its prompt cache and wrote to it (OpenAI reports no writes).
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// Cost is the call's estimated cost from the server's price table, in the table's
	// currency; 0 when the table has no price for the model.
	Cost float64 `json:"cost,omitempty"`
}

// UncachedInputTokens are the input tokens billed at the full input price: InputTokens less
// the cache reads and writes.
func (o Output) UncachedInputTokens() int64 {
	return max(o.InputTokens-o.CacheReadTokens-o.CacheWriteTokens, 0)
}

// Check is what the summary check (fidelity.Check) found in a summary: counts only, never
// content, so it may go into spans and metrics as it is.
type Check struct {
	// RequestsTotal is the number of user requests in the summarized range; RequestsRetained
	// of them were wholly in the summary or the kept messages; RequestsAppended were
	// appended by the check (whole, or their missing lines). The rest did not fit.
	RequestsTotal    int `json:"requests_total,omitempty"`
	RequestsRetained int `json:"requests_retained,omitempty"`
	RequestsAppended int `json:"requests_appended,omitempty"`
	// RequestsDropped are the requests, by their 1-based number (the check's "Request N"),
	// that did not fit and were folded whole; DroppedMessages the positions in the
	// conversation of the messages they came from, in the same order (the previous summary's
	// for a request it carried).
	RequestsDropped []int `json:"requests_dropped,omitempty"`
	DroppedMessages []int `json:"dropped_messages,omitempty"`
	// PathsTotal, PathsRetained and PathsAppended count the range's agent-named paths the
	// same way.
	PathsTotal    int `json:"paths_total,omitempty"`
	PathsRetained int `json:"paths_retained,omitempty"`
	PathsAppended int `json:"paths_appended,omitempty"`
	// Trimmed is set when the check cut the summary to make room for what it appended.
	Trimmed bool `json:"trimmed,omitempty"`
}

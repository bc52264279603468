package recalltool

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"google.golang.org/grpc"
)

// DefaultMaxTokens is the most an answer takes when Answerer.MaxTokens is unset.
const DefaultMaxTokens = 4000

// maxSources bounds the sources a query reads: those the conversation names and those their
// messages name in turn (a rolling summary's earlier summaries).
const maxSources = 32

// Expander is what answering needs of a compactord client: Expand
// (compactorv1.CompactorServiceClient has it).
type Expander interface {
	Expand(ctx context.Context, in *compactorv1.ExpandRequest, opts ...grpc.CallOption) (*compactorv1.ExpandResponse, error)
}

// Answerer answers recall_context calls through a compactord server's Expand.
type Answerer struct {
	// Client reads the sources. Required.
	Client Expander
	// MaxTokens bounds an answer, counted as a quarter of its bytes (the approx tokenizer),
	// but for a last line naming what did not fit: a query's answer holds the best matches
	// that fit (the best one cut to fit, when it alone does not), a citation's the cited
	// messages that fit, at least one, whole. 0 means DefaultMaxTokens.
	MaxTokens int
}

// Source is one original message an answer quotes: where it is (its source's hash and its
// index there) and the message, byte for byte as Compact received it.
type Source struct {
	Hash    string
	Index   int
	Message *compactorv1.Message
}

// Answer returns the text that answers a recall_context call with input inputJSON
// (ToolCallPart.input_json), for conv, the conversation the model saw: the messages a
// citation names, or those a query matches, each under a line naming it ("[<hash> m12
// user]") and rendered by Text. An error is a call the model should be told is wrong (its
// message says why) or an Expand error (a gRPC status: NOT_FOUND once the source expired).
func (a Answerer) Answer(ctx context.Context, conv []*compactorv1.Message, inputJSON string) (string, error) {
	c, err := ParseCall(inputJSON)
	if err != nil {
		return "", err
	}
	var found []Source
	if c.Citation != "" {
		found, err = a.Cited(ctx, conv, c.Citation)
	} else {
		found, err = a.Search(ctx, conv, c.Query)
	}
	if err != nil {
		return "", err
	}
	if len(found) == 0 {
		return "No compacted-away message matches " + strconv.Quote(c.Query) + ".", nil
	}
	return a.render(found, c.Citation == ""), nil
}

// render writes found, in order, while it fits the budget (at least one message, clipped
// to the budget when clip is set); a note names what did not fit.
func (a Answerer) render(found []Source, clipFirst bool) string {
	budget := a.budget()
	var b strings.Builder
	for k, s := range found {
		name := s.Hash + " m" + strconv.Itoa(s.Index)
		block := "[" + name + " " + roleName(s.Message.GetRole()) + "]\n" + Text(s.Message) + "\n"
		if k == 0 && clipFirst && approxTokens(len(block)) > budget {
			note := "\n[cut to the answer's " + strconv.Itoa(budget) + " tokens: cite " + name + " for all of it]\n"
			block = clip(block, max(0, 4*budget-len(note))) + note
		}
		if k > 0 && approxTokens(b.Len()+len(block)) > budget {
			fmt.Fprintf(&b, "[%d more not shown: over the answer's %d tokens; cite them one by one]\n", len(found)-k, budget)
			break
		}
		b.WriteString(block)
	}
	return b.String()
}

func (a Answerer) budget() int {
	if a.MaxTokens > 0 {
		return a.MaxTokens
	}
	return DefaultMaxTokens
}

// approxTokens is the approx tokenizer's count of n bytes.
func approxTokens(n int) int { return (n + 3) / 4 }

// Cited returns the original messages citation names (see ParseCitation); one naming no
// source is of the newest source conv names (its last summary's, else the last one any
// message names).
func (a Answerer) Cited(ctx context.Context, conv []*compactorv1.Message, citation string) ([]Source, error) {
	c, err := ParseCitation(citation)
	if err != nil {
		return nil, err
	}
	if c.Source == "" {
		if c.Source = newestSource(conv); c.Source == "" {
			return nil, fmt.Errorf("recall_context: the conversation names no source; cite one by its hash")
		}
	}
	return a.expand(ctx, c.Source, c.Range)
}

// newestSource is the source conv's last summary names, else the last one any message
// names, else "".
func newestSource(conv []*compactorv1.Message) string {
	last := ""
	for _, m := range slices.Backward(conv) {
		cs := citedIn(Text(m))
		if len(cs) == 0 {
			continue
		}
		if m.GetKind() == compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
			return cs[len(cs)-1].source
		}
		if last == "" {
			last = cs[len(cs)-1].source
		}
	}
	return last
}

// expand reads the messages of range rng of source hash, page by page.
func (a Answerer) expand(ctx context.Context, hash, rng string) ([]Source, error) {
	req := &compactorv1.ExpandRequest{SourceHash: hash, Range: rng}
	var out []Source
	for {
		page, err := a.Client.Expand(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("recall_context: expanding %s %s: %w", hash, rng, err)
		}
		read := hash // the source read: an earlier one when rng names it by its prefix
		if h := page.GetSourceHash(); h != "" {
			read = h
		}
		for k, m := range page.GetMessages() {
			out = append(out, Source{Hash: read, Index: int(page.GetFirstIndex()) + k, Message: m})
		}
		if page.GetNextPageToken() == "" {
			return out, nil
		}
		req.PageToken = page.GetNextPageToken()
	}
}

// Sources returns the original messages of every range conv names (its summaries' source
// markers and its cut and pruned outputs' notes) and of the ranges those messages name in
// turn (a rolling summary's earlier sources), at most maxSources ranges, each message once,
// in the order read: what a compaction of conv keeps recoverable.
func (a Answerer) Sources(ctx context.Context, conv []*compactorv1.Message) ([]Source, error) {
	var out []Source
	err := a.walk(ctx, conv, func(s Source, _ int) { out = append(out, s) })
	return out, err
}

// walk calls f with each message Sources returns and its depth: 0 for a range conv names, 1
// for one a message of those names, and so on.
func (a Answerer) walk(ctx context.Context, conv []*compactorv1.Message, f func(s Source, depth int)) error {
	type queued struct {
		cited
		depth int
	}
	var queue []queued
	for _, m := range conv {
		for _, c := range citedIn(Text(m)) {
			queue = append(queue, queued{c, 0})
		}
	}
	seen := map[cited]bool{}
	have := map[string]bool{} // hash and index
	for len(queue) > 0 && len(seen) < maxSources {
		c := queue[0]
		queue = queue[1:]
		if seen[c.cited] {
			continue
		}
		seen[c.cited] = true
		got, err := a.expand(ctx, c.source, c.rng)
		if err != nil {
			return err
		}
		for _, s := range got {
			key := s.Hash + " " + strconv.Itoa(s.Index)
			if have[key] {
				continue
			}
			have[key] = true
			for _, n := range citedIn(Text(s.Message)) {
				queue = append(queue, queued{n, c.depth + 1})
			}
			f(s, c.depth)
		}
	}
	return nil
}

// Search returns the messages of Sources(conv) whose text holds words of query, best first:
// the most of query's distinct words, then the whole query, then the newest (of a source conv
// names before one named by its messages, the later message first). Words are compared
// case-insensitively; a word is a run of letters, digits and any of "_.-/:".
func (a Answerer) Search(ctx context.Context, conv []*compactorv1.Message, query string) ([]Source, error) {
	terms := words(query)
	if len(terms) == 0 {
		return nil, fmt.Errorf("recall_context: the query %q has no words", clip(query, 80))
	}
	type hit struct {
		Source
		score, depth int
	}
	var hits []hit
	phrase := strings.ToLower(strings.TrimSpace(query))
	err := a.walk(ctx, conv, func(s Source, depth int) {
		lower := strings.ToLower(Text(s.Message))
		score := 0
		for _, t := range terms {
			if strings.Contains(lower, t) {
				score += 2
			}
		}
		if score == 0 {
			return
		}
		if len(terms) > 1 && strings.Contains(lower, phrase) {
			score++
		}
		hits = append(hits, hit{s, score, depth})
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].score != hits[j].score {
			return hits[i].score > hits[j].score
		}
		if hits[i].depth != hits[j].depth {
			return hits[i].depth < hits[j].depth
		}
		return hits[i].Index > hits[j].Index
	})
	out := make([]Source, len(hits))
	for k, h := range hits {
		out[k] = h.Source
	}
	return out, nil
}

// words returns the distinct words of s, in lower case.
func words(s string) []string {
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("_.-/:", r)
	})
	var out []string
	for _, w := range f {
		if w = strings.Trim(w, ".-/:"); w != "" && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// Text renders m for the model: its text parts as they are, a tool call as "[tool call
// <name>] <input JSON>", a tool result as "[tool result <name>] <output>" (a content
// output's text parts), one part a line; parts with no text (images, files, reasoning,
// provider state) as "[<kind>]".
func Text(m *compactorv1.Message) string {
	var lines []string
	for _, p := range m.GetParts() {
		switch v := p.GetContent().(type) {
		case *compactorv1.Part_Text:
			lines = append(lines, v.Text.GetText())
		case *compactorv1.Part_ToolCall:
			lines = append(lines, "[tool call "+v.ToolCall.GetToolName()+"] "+v.ToolCall.GetInputJson())
		case *compactorv1.Part_ToolResult:
			lines = append(lines, "[tool result "+v.ToolResult.GetToolName()+"] "+outputText(v.ToolResult.GetOutput()))
		case *compactorv1.Part_Image:
			lines = append(lines, "[image]")
		case *compactorv1.Part_File:
			lines = append(lines, "[file "+v.File.GetFilename()+"]")
		case *compactorv1.Part_Reasoning:
			lines = append(lines, "[reasoning]")
		default:
			lines = append(lines, "[part]")
		}
	}
	return strings.Join(lines, "\n")
}

// outputText is a tool output's text.
func outputText(o *compactorv1.ToolOutput) string {
	switch v := o.GetValue().(type) {
	case *compactorv1.ToolOutput_Text:
		return v.Text
	case *compactorv1.ToolOutput_Json:
		return v.Json
	case *compactorv1.ToolOutput_ErrorText:
		return "error: " + v.ErrorText
	case *compactorv1.ToolOutput_ErrorJson:
		return "error: " + v.ErrorJson
	case *compactorv1.ToolOutput_Content:
		var ts []string
		for _, p := range v.Content.GetParts() {
			if t := p.GetText(); t != nil {
				ts = append(ts, t.GetText())
			}
		}
		return strings.Join(ts, "\n")
	case *compactorv1.ToolOutput_Denied:
		return "denied: " + v.Denied
	}
	return ""
}

// roleName is the role in lower case ("user", "assistant", "system", "tool").
func roleName(r compactorv1.Role) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "ROLE_"))
}

// ExpanderFunc adapts a function to Expander: an in-process server's Expand
// (service.Server.Expand), say.
type ExpanderFunc func(context.Context, *compactorv1.ExpandRequest) (*compactorv1.ExpandResponse, error)

// Expand calls f.
func (f ExpanderFunc) Expand(ctx context.Context, in *compactorv1.ExpandRequest, _ ...grpc.CallOption) (*compactorv1.ExpandResponse, error) {
	return f(ctx, in)
}

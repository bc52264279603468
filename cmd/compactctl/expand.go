package main

import (
	"context"
	"fmt"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
)

// expand prints the original messages behind a compaction: those the source --hash names
// (its whole conversation unless --range), or those the newest summary of the input covers
// (the source marker its summary message ends with), as an IR document or --to a body.
func expand(ctx context.Context, c *command) error {
	req := &compactorv1.ExpandRequest{SourceHash: c.sourceHash, Range: c.sourceRange}
	if c.sourceHash == "" {
		doc, err := c.load(ctx)
		if err != nil {
			return err
		}
		if req.Message = sourcedMessage(doc.GetMessages()); req.Message == nil {
			return inputError{fmt.Errorf("%s: no message names a compaction's source (a summary message ending with \"[compactord source …]\"); give --hash", c.inputName())}
		}
	}
	var msgs []*compactorv1.Message
	for {
		page, err := c.backend.Expand(ctx, req)
		if err != nil {
			return err
		}
		msgs = append(msgs, page.GetMessages()...)
		if page.GetNextPageToken() == "" {
			break
		}
		req.PageToken = page.GetNextPageToken()
	}
	doc := &conversation{Messages: msgs}
	if c.to == "" {
		return c.printJSON(doc, false)
	}
	return c.lowerDoc(ctx, doc)
}

// sourcedMessage is the newest message whose text names a source.
func sourcedMessage(msgs []*compactorv1.Message) *compactorv1.Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		for _, p := range msgs[i].GetParts() {
			if _, _, ok := engine.ParseSourceMarker(p.GetText().GetText()); ok {
				return msgs[i]
			}
		}
	}
	return nil
}

// cutNoteText is what the note of a cut tool output says (engine's cutNote).
const cutNoteText = "tokens cut from the middle of this output by compaction"

// printDiff writes, per original message of in, what the compaction r did with it: kept,
// kept as a request beside the summary, summarized, dropped (history an earlier summary
// covered), pruned (its tool outputs replaced by a marker) or cut (head and tail kept).
func (c *command) printDiff(in []*compactorv1.Message, r *compactorv1.CompactResponse) error {
	var b strings.Builder
	disp := r.GetPlan().GetDispositions()
	out := r.GetMessages()
	for i, m := range in {
		what := "kept"
		if r.GetCompacted() && i < len(disp) {
			what = dispositionWord(disp[i])
			if k := len(out) - (len(in) - i); disp[i] == compactorv1.Disposition_DISPOSITION_PRUNE && k >= 0 &&
				i >= int(r.GetPlan().GetCutIndex()) && strings.Contains(messageText(out[k]), cutNoteText) {
				what = "cut"
			}
		}
		role := strings.TrimPrefix(m.GetRole().String(), "ROLE_")
		fmt.Fprintf(&b, "m%-5d %-10s %s\n", i, strings.ToLower(role), what)
	}
	if h := r.GetSourceHash(); h != "" {
		fmt.Fprintf(&b, "source %s (compactctl expand --hash %s)\n", h, h)
	}
	_, err := c.stdout.Write([]byte(b.String()))
	return err
}

// dispositionWord names a disposition as the diff prints it.
func dispositionWord(d compactorv1.Disposition) string {
	switch d {
	case compactorv1.Disposition_DISPOSITION_PRUNE:
		return "pruned"
	case compactorv1.Disposition_DISPOSITION_SUMMARIZE:
		return "summarized"
	case compactorv1.Disposition_DISPOSITION_DROP:
		return "dropped (already summarized)"
	case compactorv1.Disposition_DISPOSITION_KEEP_REQUEST:
		return "kept (request, after the summary)"
	}
	return "kept"
}

// messageText is the text of m's text parts and text tool outputs.
func messageText(m *compactorv1.Message) string {
	var b strings.Builder
	for _, p := range m.GetParts() {
		b.WriteString(p.GetText().GetText())
		b.WriteString(p.GetToolResult().GetOutput().GetText())
	}
	return b.String()
}

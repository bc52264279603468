// Package recalltool answers the recall_context tool calls a model makes for what a compaction
// folded away: the original messages behind a summary's citation ("m12–m18") or a cut tool
// output's note, or the folded messages whose text matches a query, read back from the
// server through Expand.
//
// A host offers the model the tool (Tool, which Compact also returns as
// CompactResponse.recall_tool and which LowerRequest.recall_tool writes into a body), and
// when the model calls it, passes the call's input to Answerer.Answer with the conversation
// the model saw, and sends the text back as the tool's result.
package recalltool

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// ToolName is the name the model calls the tool by.
const ToolName = "recall_context"

// toolDescription tells the model when and how to call the tool.
const toolDescription = "Fetch the original text of earlier conversation that was compacted away. " +
	"The summary cites the messages each line came from (e.g. [m12–m18]) and cut tool outputs " +
	"name where their full output is (compactord source <hash> m<i>). Give citation to get the " +
	"cited original messages, verbatim; or give query (words or identifiers to look for) to get " +
	"the compacted-away messages that mention them, best match first."

// toolSchema is the JSON Schema of the tool's input: a citation or a query.
const toolSchema = `{"type":"object","properties":{` +
	`"citation":{"type":"string","description":"A citation from the summary or a cut output's note: m12, m12–m18, optionally after the source hash it names."},` +
	`"query":{"type":"string","description":"Words or identifiers to look for in the compacted-away messages."}` +
	`}}`

// Tool returns the recall_context tool definition in the neutral form LowerRequest.tools
// takes. Each call returns a new message.
func Tool() *compactorv1.Tool {
	return &compactorv1.Tool{Name: ToolName, Description: toolDescription, InputSchemaJson: toolSchema}
}

// Call is the input of one recall_context call: a citation or a query (a citation wins
// when both are given).
type Call struct {
	Citation string `json:"citation"`
	Query    string `json:"query"`
}

// ErrNoArgument is a call with neither a citation nor a query.
var ErrNoArgument = errors.New("recall_context: give a citation or a query")

// ParseCall reads a call's input, the JSON object the model wrote (ToolCallPart.input_json).
func ParseCall(inputJSON string) (Call, error) {
	var c Call
	if err := json.Unmarshal([]byte(inputJSON), &c); err != nil {
		return Call{}, fmt.Errorf("recall_context: the input is not a JSON object of strings: %w", err)
	}
	c.Citation, c.Query = strings.TrimSpace(c.Citation), strings.TrimSpace(c.Query)
	if c.Citation == "" && c.Query == "" {
		return Call{}, ErrNoArgument
	}
	return c, nil
}

// Citation is a citation split into the source it names (64 hex digits; "" for the newest
// source of the conversation) and its range of messages, as Expand's range takes it
// ("m12–m18", "m12-18", "m12", "12-18", "s1a2b3c4d m12–18"): the server parses the range, so every form a
// summary writes is read in one place.
type Citation struct{ Source, Range string }

// citationRE reads a citation: optionally "compactord source" and a source hash, then the
// range, which may name an earlier source by its hash prefix as a summary's carried lines
// do ("s1a2b3c4d m12–18", engine.Citation; the server resolves it); a bracket, a trailing
// ": …" (a copied source marker) and spaces around it are ignored.
var citationRE = regexp.MustCompile(`^\[?\s*(?:compactord\s+source\s+)?(?:([0-9a-fA-F]{64})[\s:/@#]*)?` +
	`\[?((?:s[0-9a-f]{8,64} )?m?\d{1,9}(?:\s*(?:–|—|-|\.\.)\s*m?\d{1,9})?)\]?\s*(?:[:,;].*)?\]?$`)

// ParseCitation splits a citation into its source and its range.
func ParseCitation(s string) (Citation, error) {
	m := citationRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Citation{}, fmt.Errorf("recall_context: %q is not a citation (want m12, m12–m18, or a source hash and a range)", clip(s, 80))
	}
	return Citation{Source: strings.ToLower(m[1]), Range: m[2]}, nil
}

// markerRE finds the sources a conversation names: a summary's source marker ("[compactord
// source <hash> m0–m40: …]") or a cut output's note ("… compactord source <hash> m7 …"), with
// the range they name.
var markerRE = regexp.MustCompile(`compactord source ([0-9a-f]{64}) (m\d{1,9}(?:[–-]m\d{1,9})?)`)

// cited is one source a conversation names and the range it names of it.
type cited struct{ source, rng string }

// citedIn returns the sources text names, in order.
func citedIn(text string) []cited {
	var out []cited
	for _, m := range markerRE.FindAllStringSubmatch(text, -1) {
		out = append(out, cited{m[1], m[2]})
	}
	return out
}

// clip returns s cut to at most n bytes, at a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

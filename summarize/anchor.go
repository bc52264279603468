package summarize

import (
	"strings"

	"github.com/compactord/compactord/engine"
)

// Folding in a previous summary (the anchor): an extractive one is merged section by
// section, the sections of earlier versions of its format included; any other text is kept
// whole as the earlier summary.

// Headings of earlier versions of the extractive format, still read in anchors.
const (
	legacyStatements = "Latest assistant statements"
	legacyCalls      = "Tool calls"
	legacyOutputs    = "Tool output excerpts"
	legacyIdents     = "Identifiers"
	legacyFileIdents = "Files and identifiers"
)

// anchorSection maps each heading an anchor may use to the section its items go to ("" for
// the names-only sections).
var anchorSection = map[string]string{
	secEarlier: secEarlier, secRequests: secRequests, secStopped: secNotes, secPlan: secPlan,
	secErrors: secErrors, secFiles: secFiles, secCalls: secCalls, secNotes: secNotes,
	legacyStatements: secNotes, legacyCalls: secCalls, legacyOutputs: secCalls,
	legacyIdents: "", legacyFileIdents: "",
}

// anchor folds in a previous summary.
func (x *extractor) anchor(a string) {
	a = strings.TrimSpace(a)
	if a == "" {
		return
	}
	parsed := parseExtractive(a)
	if parsed == nil {
		x.use.note(a, 0, fromOutput)
		x.prior = append(x.prior, item{section: secEarlier, text: a, prio: prioEarlier})
		return
	}
	for _, h := range parsed.order {
		for _, it := range parsed.items[h] {
			x.use.note(it, 0, fromOutput)
			switch sec := anchorSection[h]; sec {
			case "": // a list of names: nothing said of them
			case secRequests:
				x.requests = append(x.requests, textAt{text: strings.ReplaceAll(strings.TrimPrefix(it, "- "), "\n  ", "\n")})
			case secFiles:
				path, acts, _ := strings.Cut(strings.TrimPrefix(it, "- "), ": ")
				x.file(path, actMention)
				if f := x.files.files[path]; f != nil && acts != "" {
					f.prior, f.priorCites = engine.CutCitations(acts)
				}
			case secPlan:
				x.priorPlan = append(x.priorPlan, it)
			default:
				p := item{section: sec, text: it, base: 0.3}
				if h == secStopped {
					p.text = "- earlier, " + strings.TrimPrefix(it, "- ")
				}
				if sec == secErrors && !strings.Contains(it, "(resolved") {
					p.base = 1
				}
				if sec == secEarlier {
					p.prio = prioEarlier
				}
				x.prior = append(x.prior, p)
			}
		}
	}
}

// parsedSummary is an extractive summary split into its sections' items.
type parsedSummary struct {
	order []string // headings in order
	items map[string][]string
}

// parseExtractive splits an extractive summary into its sections' items, or returns nil when
// a is not one.
func parseExtractive(a string) *parsedSummary {
	a = strings.TrimSpace(strings.TrimPrefix(a, engine.CitationLegend))
	if !strings.HasPrefix(a, "## ") {
		return nil
	}
	out := &parsedSummary{items: map[string][]string{}}
	cur := ""
	for _, line := range strings.Split(a, "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			cur = strings.TrimPrefix(line, "## ")
			if _, known := anchorSection[cur]; !known {
				return nil
			}
			out.order = append(out.order, cur)
		case cur == secEarlier:
			// Free text kept from an earlier non-extractive anchor: one item.
			if n := len(out.items[cur]); n > 0 {
				out.items[cur][n-1] += "\n" + line
			} else if strings.TrimSpace(line) != "" {
				out.items[cur] = append(out.items[cur], line)
			}
		case cur == "" || strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "- "):
			out.items[cur] = append(out.items[cur], line)
		default:
			n := len(out.items[cur])
			if n == 0 {
				return nil
			}
			out.items[cur][n-1] += "\n" + line
		}
	}
	return out
}

package readme

import (
	"regexp"
	"strings"
)

// Block is a fenced code block of the README with the marker comment before it.
type Block struct {
	// Marker is what the comment says: "example: <path>", "run: setup", "run: server",
	// "run", "not run: <why>"; empty for an unmarked block.
	Marker string
	// Lang is the fence's language ("sh", "python", ...).
	Lang string
	// Text is the block's content, ending in a newline.
	Text string
	// Line is the 1-based README line of the opening fence.
	Line int
	// Section is the title of the "## " section the block is in.
	Section string
}

// The markers of runnable blocks. A newcomer runs them top to bottom, and so does the
// README runner (internal/readme/run): setup blocks with the network, then the quick start
// (server and step blocks, with the sh examples) on loopback alone.
const (
	Setup  = "run: setup"  // installs something; may use the network
	Server = "run: server" // one command that serves until stopped; runs in the background
	Step   = "run"         // a quick-start step, against the server
)

// Example is the marker prefix of a block that quotes a file ("example: path").
const Example = "example: "

// NotRun is the marker prefix of a block in a run section that is deliberately not run,
// with the reason ("not run: needs a Docker daemon").
const NotRun = "not run: "

// markerLine matches a marker comment alone on its line.
var markerLine = regexp.MustCompile(`^<!-- (.+?) -->$`)

// Blocks returns the README's fenced code blocks in order.
func Blocks(readme string) []Block {
	var (
		out     []Block
		section string
		marker  string
		cur     *Block
	)
	for i, line := range strings.Split(readme, "\n") {
		switch {
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.Text += line + "\n"
		case strings.HasPrefix(line, "```"):
			cur = &Block{Marker: marker, Lang: strings.TrimPrefix(line, "```"), Line: i + 1, Section: section}
			marker = ""
		case strings.HasPrefix(line, "## "):
			section, marker = strings.TrimPrefix(line, "## "), ""
		case markerLine.MatchString(line):
			marker = markerLine.FindStringSubmatch(line)[1]
		case strings.TrimSpace(line) != "":
			marker = "" // a marker applies to the block right after it
		}
	}
	return out
}

// Runnable reports whether the runner executes b: a run block, or an sh example.
func (b Block) Runnable() bool {
	switch {
	case b.Marker == Setup, b.Marker == Server, b.Marker == Step:
		return true
	case strings.HasPrefix(b.Marker, Example):
		return b.Lang == "sh"
	}
	return false
}

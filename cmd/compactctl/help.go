package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// commandDoc is what help says about a command: its arguments, what it does, and the flags
// that apply to it besides the connection flags.
type commandDoc struct {
	args, does string
	flags      []string
}

// policyFlagNames are the flags that build the Policy of plan and compact.
var policyFlagNames = []string{"policy", "context-window", "trigger-tokens", "keep-recent-tokens", "summary-max-tokens", "tokenizer"}

// lowerFlagNames are the flags of a body written --to a provider.
var lowerFlagNames = []string{"to", "model", "base-body", "strict"}

// commandDocs describes every command of commands, in the order help lists them.
var commandDocs = []struct {
	name string
	doc  commandDoc
}{
	{"lift", commandDoc{"[file|-]", "read a provider body; print the IR document", []string{"from"}}},
	{"plan", commandDoc{"[file|-]", "print the compaction plan as a table (--json: as JSON)",
		append([]string{"from", "explain", "json"}, policyFlagNames...)}},
	{"compact", commandDoc{"[file|-]", "print the compacted conversation (--to: as a provider body)",
		slices.Concat([]string{"from", "json", "diff", "force", "summarizer", "instructions"}, policyFlagNames, lowerFlagNames)}},
	{"expand", commandDoc{"[file|-]", "print the original messages behind the input's newest summary, or --hash's\n" +
		"(the conversation the compaction received; --range: some of them), kept by the server",
		append([]string{"from", "hash", "range"}, lowerFlagNames...)}},
	{"recall", commandDoc{"[file|-]", "print the answer to the model's recall_context call on the input (the compacted\n" +
		"conversation): the originals --citation names, or those --query's words match",
		[]string{"from", "citation", "query", "max-tokens"}}},
	{"lower", commandDoc{"[file|-]", "print the conversation as a provider body (--to is required)",
		append([]string{"from"}, lowerFlagNames...)}},
	{"health", commandDoc{"[service]", "ask the server's grpc.health.v1 service (no credentials or\n" +
		"reflection needed); print its status, exit 0 when SERVING", nil}},
}

// docOf is the help of the command name, if it is one.
func docOf(name string) (commandDoc, bool) {
	for _, d := range commandDocs {
		if d.name == name {
			return d.doc, true
		}
	}
	return commandDoc{}, false
}

// commandNames lists the commands, as help orders them.
func commandNames() []string {
	names := make([]string, len(commandDocs))
	for i, d := range commandDocs {
		names[i] = d.name
	}
	return names
}

const inputHelp = `The input is a provider body or an IR document, from the file or standard
input, at most --max-message-bytes. Flags may stand anywhere: before or after
the command and the file ("--" ends them, for a file whose name starts with -).
`

// printHelp writes the help of the command name to w, or compactctl's whole help when name
// is not a command.
func printHelp(w io.Writer, fs *flag.FlagSet, name string) {
	conn := connFlagNames()
	if doc, ok := docOf(name); ok {
		fmt.Fprintf(w, "usage: compactctl [flags] %s %s\n\n%s\n\n", name, doc.args, indent(doc.does, ""))
		if len(doc.flags) > 0 {
			fmt.Fprintln(w, "Flags:")
			printFlags(w, fs, func(f string) bool { return slices.Contains(doc.flags, f) })
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "Connection flags: %s\n(compactctl -h describes them, and the exit statuses)\n", "--"+strings.Join(conn, ", --"))
		return
	}
	fmt.Fprint(w, "usage: compactctl [flags] plan|compact|lower|lift|expand|recall [file|-]\n"+
		"       compactctl [flags] health [service]\n"+
		"       compactctl help [command]\n\n")
	for _, d := range commandDocs {
		fmt.Fprintf(w, "  %-8s %s\n", d.name, indent(d.doc.does, strings.Repeat(" ", 11)))
	}
	fmt.Fprintf(w, "  %-8s %s\n\n%s\n", "help", "print this, or a command's flags (compactctl help compact)", inputHelp)
	fmt.Fprintln(w, "Flags of the commands (compactctl help COMMAND: those of one):")
	printFlags(w, fs, func(f string) bool { return !slices.Contains(conn, f) })
	fmt.Fprintln(w, "\nConnection flags (every command):")
	printFlags(w, fs, func(f string) bool { return slices.Contains(conn, f) })
	fmt.Fprint(w, "\n"+exitCodesHelp)
}

// indent puts prefix before every line of s but the first.
func indent(s, prefix string) string { return strings.ReplaceAll(s, "\n", "\n"+prefix) }

// printFlags writes the flags of fs that keep selects, as they are typed (--name), each with
// its value's kind, its description and its default.
func printFlags(w io.Writer, fs *flag.FlagSet, keep func(name string) bool) {
	fs.VisitAll(func(f *flag.Flag) {
		if !keep(f.Name) {
			return
		}
		kind, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if kind != "" {
			line += " " + kind
		}
		switch f.DefValue {
		case "", "0", "false":
		default:
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n%s", line, wrap(usage, "      ", helpWidth))
	})
}

// helpWidth is the width help wraps descriptions at: a terminal's 80 columns, less a margin.
const helpWidth = 78

// wrap breaks s into lines of at most width columns (a longer word stands alone), each
// starting with prefix and ending in a newline.
func wrap(s, prefix string, width int) string {
	var b strings.Builder
	line := prefix
	for _, word := range strings.Fields(s) {
		if line != prefix && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = prefix
		}
		if line != prefix {
			line += " "
		}
		line += word
	}
	b.WriteString(line + "\n")
	return b.String()
}

// connFlagNames are the names of the flags every command takes: where the server is and how
// to reach it (connFlags).
func connFlagNames() []string {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	new(connFlags).register(fs)
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// parseArgs parses the flags wherever they stand among args (before the command, between it
// and the input, after the input) and returns the other arguments in order. "--" ends the
// flags: every argument after it is an argument.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return positional, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// flagError is the one line that says what is wrong with the flags: for a flag that does not
// exist, the closest one there is.
func flagError(fs *flag.FlagSet, err error) string {
	const pointer = " (compactctl -h lists the flags)"
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if near := closest(name, names); near != "" {
			return fmt.Sprintf("unknown flag --%s: did you mean --%s?%s", name, near, pointer)
		}
		return "unknown flag --" + name + pointer
	}
	// The flag package names a flag with one dash ("invalid value "x" for flag -timeout").
	return oneDash.ReplaceAllString(msg, "$1--$2") + pointer
}

// oneDash matches a flag name written with one dash.
var oneDash = regexp.MustCompile(`(^|\s)-([a-z])`)

// unknownCommand is the one line for a command that does not exist.
func unknownCommand(name string) string {
	names := append(commandNames(), "help")
	if near := closest(name, names); near != "" {
		return fmt.Sprintf("unknown command %q: did you mean %s? (compactctl -h lists the commands)", name, near)
	}
	return fmt.Sprintf("unknown command %q (want %s; compactctl -h)", name, strings.Join(names, ", "))
}

// closest returns the name among names nearest to typed: the one fewest edits away, when that
// is few enough to be a typo, else the only one that contains typed (--window:
// --context-window); "" when none is.
func closest(typed string, names []string) string {
	best, bestD := "", len(typed)
	for _, n := range names {
		if d := editDistance(typed, n); d < bestD {
			best, bestD = n, d
		}
	}
	if best != "" && bestD <= max(maxTypoEdits, len(typed)/3) {
		return best
	}
	var holding []string
	for _, n := range names {
		if len(typed) >= minContainedLen && strings.Contains(n, typed) {
			holding = append(holding, n)
		}
	}
	if len(holding) == 1 {
		return holding[0]
	}
	return ""
}

const (
	// maxTypoEdits is the edit distance always taken for a typo (longer names allow a third
	// of their length): two letters swapped, or one missing and one doubled.
	maxTypoEdits = 2
	// minContainedLen is the shortest name that may stand for a flag holding it: shorter
	// fragments ("to", "js") are in too many names to point at one.
	minContainedLen = 4
)

// editDistance is the Levenshtein distance between a and b, in bytes (flag and command names
// are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Command compactctl calls compactor.v1.CompactorService from a terminal or a script.
//
//	compactctl [flags] plan|compact|lower|lift [file|-]
//
// Every command reads one JSON document from the file named last, or from standard input
// when it is "-" or absent: either a provider request body (Anthropic Messages, OpenAI Chat,
// OpenAI Responses, Gemini, Bedrock Converse; --from names it, else it is detected) or an IR
// document, the JSON form of a LiftResponse that `compactctl lift` prints. A provider body is
// lifted first, so `compactctl compact --to anthropic < openai-body.json` compacts an OpenAI
// Chat body and prints an Anthropic one. The body's other fields (model, tools, ...) are kept
// only when --to is its own provider; for another, --base-body FILE gives the target's (an
// Anthropic body needs model and max_tokens), and --strict fails rather than drop anything.
//
// It talks to a server at --addr (default $COMPACTORD_ADDR, else localhost:50051), or with
// --local runs the same engine and extractive summarizer in-process, with no server.
//
// Standard output carries only the result, so it can be piped; warnings and notes go to
// standard error. The exit status is one a script can branch on:
//
//	0  success (compact also exits 0 when nothing needed compacting: its output is the input)
//	1  any other failure (the server's INTERNAL, an I/O error writing the output)
//	2  usage: unknown command or flag, a missing or malformed flag value
//	3  invalid input: unreadable JSON, a body no format reads, INVALID_ARGUMENT
//	4  the conversation cannot be made to fit (FAILED_PRECONDITION) or is over a size limit
//	   (RESOURCE_EXHAUSTED)
//	5  transient: the server or its summarizer is unavailable or the deadline passed; retry
//	6  the credentials were refused (UNAUTHENTICATED, PERMISSION_DENIED)
//
// A gRPC error is printed as "compactctl: CODE: message", then one line per field the
// server named ("  messages[3].role: ...").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses; see the package doc.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInvalid     = 3
	exitUnfit       = 4
	exitUnavailable = 5
	exitDenied      = 6
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// commands maps a command name to what it does with its input.
var commands = map[string]func(ctx context.Context, c *command) error{
	"lift":    lift,
	"plan":    plan,
	"compact": compact,
	"lower":   lower,
}

const usage = `usage: compactctl [flags] plan|compact|lower|lift [file|-]

  lift     read a provider body; print the IR document
  plan     print the compaction plan (--explain: as a table)
  compact  print the compacted conversation (--to: as a provider body)
  lower    print the conversation as a provider body (--to is required)

The input is a provider body or an IR document, from the file or standard input.
Flags go before or after the command, before the file:
`

// run is compactctl with its environment passed in; it returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &command{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	fs := c.flags()
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	// Flags may come before and after the command: parse, take the command, parse the rest.
	if err := fs.Parse(args); err != nil {
		return usageStatus(err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return exitUsage
	}
	name := rest[0]
	do, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "compactctl: unknown command %q\n", name)
		fs.Usage()
		return exitUsage
	}
	if err := fs.Parse(rest[1:]); err != nil {
		return usageStatus(err)
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(stderr, "compactctl: %s reads one input, got %d: %q\n", name, fs.NArg(), fs.Args())
		return exitUsage
	}
	c.name, c.input = name, fs.Arg(0)
	if err := c.check(); err != nil {
		fmt.Fprintf(stderr, "compactctl: %v\n", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, c.conn.timeout)
	defer cancel()
	err := c.connect(ctx)
	if err == nil {
		defer c.close()
		err = do(ctx, c)
	}
	if err != nil {
		return report(stderr, err)
	}
	return exitOK
}

// usageStatus is the exit status of a flag parsing error: 0 for -h, else exitUsage.
func usageStatus(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

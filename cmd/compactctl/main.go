// Command compactctl calls compactor.v1.CompactorService from a terminal or a script.
//
//	compactctl [flags] plan|compact|lower|lift [file|-]
//	compactctl [flags] health [service]
//	compactctl help [command]
//
// Flags may stand anywhere among the arguments, before or after the command and the file.
// Every command reads one JSON document from the file named last, or from standard input
// when it is "-" or absent: either a provider request body (Anthropic Messages, OpenAI Chat,
// OpenAI Responses, Gemini, Bedrock Converse; --from names it, else it is detected) or an IR
// document, the JSON form of a LiftResponse that `compactctl lift` prints. A provider body is
// lifted first, so `compactctl compact --to anthropic < openai-body.json` compacts an OpenAI
// Chat body and prints an Anthropic one. The body's tools go along in the target's form, and
// its other fields (model, sampling, ...) where the target has them (all of them when --to is
// its own provider); --base-body FILE gives the rest of the target's (an Anthropic body needs
// model and max_tokens), and --strict fails rather than drop anything, tools and other fields
// included.
//
// It talks to a server at --addr (default $COMPACTORD_ADDR, else localhost:50051), or with
// --local runs the same engine and extractive summarizer in-process, with no server.
//
// Standard output carries only the result, so it can be piped; warnings and notes go to
// standard error. Bodies are printed as the server wrote them, byte for byte (tool-call
// inputs inside them are raw JSON whose bytes the prefix hash covers). The exit status is
// one a script can branch on (exitCodesHelp, which -h prints too).
//
// A gRPC error is printed as "compactctl: CODE: message", then one line per field the
// server named ("  messages[3].role: ..."); a field in the input body is named by the input
// file ("conversation.json: messages[2]: ..."), malformed JSON by line and column.
// Connection faults that no retry cures (an address that does not resolve or where nothing
// listens, TLS to a plaintext port or plaintext to a TLS one, an untrusted certificate, a
// refused client certificate) are found before the first call and printed with the flag to
// fix (exit 7).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Exit statuses; see exitCodesHelp.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInvalid     = 3
	exitUnfit       = 4
	exitUnavailable = 5
	exitDenied      = 6
	exitConfig      = 7
)

// exitCodesHelp is the exit statuses, as -h prints them.
const exitCodesHelp = `Exit status:
  0  success (compact also exits 0 when nothing needed compacting: its output is the input)
  1  any other failure (the server's INTERNAL, an I/O error writing the output)
  2  usage: unknown command or flag, a missing or malformed flag value
  3  invalid input: malformed JSON, a body no format reads, INVALID_ARGUMENT
  4  the conversation cannot be made to fit (FAILED_PRECONDITION) or is over a size limit
     (RESOURCE_EXHAUSTED, --max-message-bytes)
  5  transient: the server or its summarizer is unavailable, or the deadline passed; retry
  6  the credentials were refused (UNAUTHENTICATED, PERMISSION_DENIED)
  7  cannot reach the server as configured: the address does not resolve or nothing
     listens there, TLS does not match the port, a certificate is refused; the message
     names the flag to fix (never retried)
`

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
	"health":  health,
	"expand":  expand,
	"recall":  recall,
}

// run is compactctl with its environment passed in; it returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &command{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	fs := c.flags()
	// Errors and help are written here, one line each, never the flag package's usage dump.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	args, err := parseArgs(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp): // -h, -help or --help, after a command: its help
		printHelp(stdout, fs, first(args))
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "compactctl: %s\n", flagError(fs, err))
		return exitUsage
	case len(args) == 0:
		fmt.Fprintf(stderr, "compactctl: no command (want %s; compactctl -h for help)\n", strings.Join(commandNames(), ", "))
		return exitUsage
	case args[0] == "help":
		if len(args) > 1 {
			if _, ok := docOf(args[1]); !ok {
				fmt.Fprintf(stderr, "compactctl: help: %s\n", unknownCommand(args[1]))
				return exitUsage
			}
		}
		printHelp(stdout, fs, first(args[1:]))
		return exitOK
	}
	c.typed = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.typed[f.Name] = true })
	name := args[0]
	do, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "compactctl: %s\n", unknownCommand(name))
		return exitUsage
	}
	if len(args) > 2 {
		fmt.Fprintf(stderr, "compactctl: %s reads one input, got %d: %q\n", name, len(args)-1, args[1:])
		return exitUsage
	}
	c.name, c.input = name, first(args[1:])
	if err := c.check(); err != nil {
		fmt.Fprintf(stderr, "compactctl: %v\n", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, c.conn.timeout)
	defer cancel()
	err = c.connect(ctx)
	if err == nil {
		defer c.close()
		err = do(ctx, c)
	}
	if err != nil {
		return c.report(err)
	}
	return exitOK
}

// first is the first of args, or "".
func first(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

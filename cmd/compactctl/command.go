package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/internal/bytesize"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// command is one invocation: its flags, its streams and, once connected, its backend.
type command struct {
	name  string // the command: lift, plan, compact, lower, expand or health
	input string // the input file; "" or "-" is standard input (health: the service)
	// inputIsIR is set when the input was read as an IR document (not a provider body).
	inputIsIR bool
	getenv    func(string) string
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer

	conn connFlags
	from string // the input's format: auto, ir or a provider name
	to   string // the output's provider, for compact and lower
	// model is the model the lowered body is for: its "model" when the base body names none
	// (withModel), and LowerRequest.model.
	model    string
	baseBody string // a file holding the --to provider's base body (LowerRequest.base_body)
	base     string // its contents, read by check before any call
	strict   bool   // LowerRequest.strict
	explain  bool   // plan: the table (plan's default output)
	full     bool   // plan and compact: the whole response as JSON
	diff     bool   // compact: what became of each original message
	// sourceHash and sourceRange are expand's source and range (ExpandRequest).
	sourceHash, sourceRange string
	// citation, query and maxTokens are recall's call (recalltool.Call) and bound.
	citation, query string
	maxTokens       int

	policyFile string
	// typed is the flags the command line set, by name (the fields of a --policy file are
	// named by the file where no flag overrides them).
	typed map[string]bool
	// fit is the line an irreducible error adds: the smallest window that fits (fitHint).
	fit        string
	policy     policyFlags
	force      bool
	summarizer string
	instruct   string

	backend backend
	health  healthpb.HealthClient // remote only
	close   func()
}

// policyFlags are the Policy fields most calls set; the rest come from --policy.
type policyFlags struct {
	contextWindow, triggerTokens, keepRecentTokens, summaryMaxTokens int64
	tokenizer                                                        string
}

func (c *command) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("compactctl", flag.ContinueOnError)
	c.conn.register(fs)
	fs.StringVar(&c.from, "from", "auto", "the input's format: "+fromList)
	fs.StringVar(&c.to, "to", "", "the output's provider ("+providerList+"); lower requires it, compact prints the IR document without it")
	fs.StringVar(&c.model, "model", "", "with --to: the model the body is for, written as its \"model\" when neither --base-body nor the input's own fields (carried into a body of its own provider, or between OpenAI's two) name one: theirs wins. It also decides model-dependent rules such as OpenAI's developer role. Gemini and Bedrock bodies name no model (it goes in the URL)")
	fs.StringVar(&c.baseBody, "base-body", "", "with --to: a JSON file of the target's other fields (model, max_tokens, tools, ...); they win over the input's")
	fs.BoolVar(&c.strict, "strict", false, "with --to: fail (exit 4) rather than drop or change anything the target cannot carry")
	fs.BoolVar(&c.explain, "explain", false, "plan: print the decision as a table (plan's default; --json prints JSON)")
	fs.BoolVar(&c.full, "json", false, "plan and compact: print the whole response as JSON, every field (false and 0 included)")
	fs.StringVar(&c.policyFile, "policy", "", "JSON file holding a compactor.v1.Policy; --context-window, --trigger-tokens, --keep-recent-tokens, --summary-max-tokens and --tokenizer override its fields")
	fs.Int64Var(&c.policy.contextWindow, "context-window", 0, "the model's context window in tokens (required unless --trigger-tokens or --policy sets it)")
	fs.Int64Var(&c.policy.triggerTokens, "trigger-tokens", 0, "act above this many tokens instead of the trigger ratio")
	fs.Int64Var(&c.policy.keepRecentTokens, "keep-recent-tokens", 0, "token budget of the verbatim tail after a summary (0: the server's default)")
	fs.Int64Var(&c.policy.summaryMaxTokens, "summary-max-tokens", 0, "tokens reserved for the summary (0: the server's default)")
	fs.StringVar(&c.policy.tokenizer, "tokenizer", "", "o200k_base (default), cl100k_base or approx")
	fs.BoolVar(&c.force, "force", false, "compact: summarize even under the trigger")
	fs.StringVar(&c.summarizer, "summarizer", "", "compact: the summarizer's name (default: the server's default)")
	fs.StringVar(&c.instruct, "instructions", "", "compact: extra focus for the summary")
	fs.BoolVar(&c.diff, "diff", false, "compact: print what became of each original message (kept, summarized, pruned, cut) instead of the conversation")
	fs.StringVar(&c.sourceHash, "hash", "", "expand: the source to expand (CompactResponse.source_hash); no input is read")
	fs.StringVar(&c.sourceRange, "range", "", "expand: which messages of the source, as a citation (m12–m18) or 12-18")
	fs.StringVar(&c.citation, "citation", "", "recall: the model's citation (m12–m18, or a source hash and a range)")
	fs.StringVar(&c.query, "query", "", "recall: the model's query (words to look for in what was compacted away)")
	fs.IntVar(&c.maxTokens, "max-tokens", 0, "recall: the answer's bound in tokens, a quarter of its bytes (0: 4000)")
	return fs
}

// check reports flag combinations that cannot work, before anything is read or dialled.
func (c *command) check() error {
	if c.from != "auto" && c.from != "ir" {
		if _, err := parseProvider(c.from); err != nil {
			return fmt.Errorf("--from: unknown format %q (want %s)", c.from, fromList)
		}
	}
	if c.to != "" {
		if _, err := parseProvider(c.to); err != nil {
			return fmt.Errorf("--to: %w", err)
		}
	}
	switch {
	case c.name == "health" && c.conn.local:
		return errors.New("health asks a server; --local runs none")
	case c.name == "lower" && c.to == "":
		return errors.New("lower needs --to")
	case c.name == "lift" && c.from == "ir":
		return errors.New("lift reads a provider body, not --from ir")
	case c.diff && c.name != "compact":
		return errors.New("--diff applies to compact only")
	case c.diff && (c.full || c.to != ""):
		return errors.New("--diff prints the diff; --json and --to print the result: choose one")
	case (c.sourceHash != "" || c.sourceRange != "") && c.name != "expand":
		return errors.New("--hash and --range apply to expand only")
	case (c.citation != "" || c.query != "" || c.maxTokens != 0) && c.name != "recall":
		return errors.New("--citation, --query and --max-tokens apply to recall only")
	case c.name == "recall" && c.citation == "" && c.query == "":
		return errors.New("recall needs --citation or --query")
	case c.maxTokens < 0:
		return errors.New("--max-tokens must not be negative")
	case c.explain && c.name != "plan":
		return errors.New("--explain applies to plan only")
	case c.explain && c.full:
		return errors.New("--explain and --json exclude each other")
	case c.full && c.name != "plan" && c.name != "compact":
		return errors.New("--json applies to plan and compact only")
	case c.full && c.to != "":
		return errors.New("--json prints the response; --to a body: choose one")
	case (c.baseBody != "" || c.strict || c.model != "") && c.to == "":
		return errors.New("--base-body, --model and --strict apply to a body written --to a provider")
	}
	if c.baseBody != "" {
		// Read before any call: a Compact may already have spent a summary when the
		// body is written.
		b, err := os.ReadFile(c.baseBody)
		if err != nil {
			return fmt.Errorf("--base-body: %w", err)
		}
		c.base = string(b)
	}
	return c.conn.check()
}

// readInput reads the whole input file, or standard input, up to --max-message-bytes: the
// server refuses a larger request, and --local holds to the same limit.
func (c *command) readInput() ([]byte, error) {
	limit := int64(c.conn.maxMessageBytes)
	r := c.stdin
	if c.input != "" && c.input != "-" {
		f, err := os.Open(c.input)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > limit {
			return nil, tooLarge{c.inputName(), st.Size(), limit}
		}
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", c.inputName(), err)
	}
	if int64(len(b)) > limit {
		return nil, tooLarge{c.inputName(), -1, limit}
	}
	return b, nil
}

// tooLarge is an input over --max-message-bytes; size is -1 when unknown (standard input).
type tooLarge struct {
	name        string
	size, limit int64
}

func (e tooLarge) Error() string {
	size := "more than " + bytesize.Size(e.limit).Human()
	if e.size >= 0 {
		size = bytesize.Size(e.size).Human()
	}
	return fmt.Sprintf("%s: %s, over the %s request limit (--max-message-bytes; compactord's --max-message-bytes bounds the server's)",
		e.name, size, bytesize.Size(e.limit))
}

// buildPolicy is the --policy file with the policy flags set over it.
func (c *command) buildPolicy() (*compactorv1.Policy, error) {
	p := &compactorv1.Policy{}
	if c.policyFile != "" {
		b, err := os.ReadFile(c.policyFile)
		if err != nil {
			return nil, usageError{err}
		}
		if err := protojson.Unmarshal(b, p); err != nil {
			return nil, usageError{fmt.Errorf("--policy %s: %w", c.policyFile, err)}
		}
	}
	f := c.policy
	for _, set := range []struct {
		dst *int64
		v   int64
	}{{&p.ContextWindow, f.contextWindow}, {&p.TriggerTokens, f.triggerTokens},
		{&p.KeepRecentTokens, f.keepRecentTokens}, {&p.SummaryMaxTokens, f.summaryMaxTokens}} {
		if set.v != 0 {
			*set.dst = set.v
		}
	}
	if f.tokenizer != "" {
		p.Tokenizer = f.tokenizer
	}
	if p.ContextWindow == 0 && p.TriggerTokens == 0 {
		return nil, usageError{errors.New(c.name + " needs --context-window, --trigger-tokens or a --policy file that sets one")}
	}
	return p, nil
}

// warn writes the warnings of a call (what: "lift", "compact" or "lower") to standard error,
// one line each with one prefix. Lift's name a place in the input, so they start with the
// input's name; the request fields any of them names are written as the flags that set them.
func (c *command) warn(what string, warnings []string) {
	for _, w := range warnings {
		if what == "lift" {
			w = c.inputName() + ": " + w
		}
		fmt.Fprintf(c.stderr, "compactctl: warning: %s\n", c.inFlags(w))
	}
}

// The --from and --to names of the providers are engine/format's (format.ProviderName).
const providerList = "anthropic, openai-chat, openai-responses, gemini or bedrock"

// fromList is what --from accepts.
const fromList = "auto (an IR document, else the detected provider), ir, " + providerList

// parseProvider reads a --from or --to provider name, in any case.
func parseProvider(name string) (compactorv1.Provider, error) {
	if p, ok := format.ParseProvider(strings.ToLower(name)); ok {
		return p, nil
	}
	return 0, fmt.Errorf("unknown provider %q (want %s)", name, providerList)
}

// defaultTimeout bounds every call unless --timeout says otherwise: a summarizing Compact
// may wait on an LLM.
const defaultTimeout = 2 * time.Minute

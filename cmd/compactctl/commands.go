package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// conversation is the input, read into the IR: the messages, the provider they came from and
// the rest of the body (model, tools, ...) to pass back when lowering.
type conversation = compactorv1.LiftResponse

// load reads the input as an IR document or, failing that, lifts it as a provider body.
func (c *command) load(ctx context.Context) (*conversation, error) {
	body, err := c.readInput()
	if err != nil {
		return nil, inputError{err}
	}
	if err := json.Unmarshal(body, new(json.RawMessage)); err != nil {
		return nil, inputError{c.notJSON(body, err)}
	}
	if c.from == "auto" || c.from == "ir" {
		doc := &conversation{}
		err := protojson.Unmarshal(body, doc)
		if err == nil && len(doc.Messages) > 0 {
			c.inputIsIR = true
			return doc, nil
		}
		if c.from == "ir" {
			if err == nil {
				err = fmt.Errorf("no messages")
			}
			return nil, inputError{fmt.Errorf("%s: not an IR document: %w", c.inputName(), err)}
		}
	}
	req := &compactorv1.LiftRequest{Body: string(body)}
	if c.from != "auto" {
		req.Provider, _ = parseProvider(c.from) // checked by command.check
	}
	doc, err := c.backend.Lift(ctx, req)
	if err != nil {
		return nil, err
	}
	c.warn("lift", doc.Warnings)
	return doc, nil
}

// notJSON locates a JSON syntax error in the input by line and column (1-based, columns in
// characters), as an editor shows them: "conversation.json:3:17: not JSON: invalid
// character ...".
func (c *command) notJSON(body []byte, err error) error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return fmt.Errorf("%s: not JSON: %w", c.inputName(), err)
	}
	at := max(min(int(se.Offset)-1, len(body)), 0) // the offending byte
	line := 1 + bytes.Count(body[:at], []byte{'\n'})
	col := 1 + utf8.RuneCount(body[bytes.LastIndexByte(body[:at], '\n')+1:at])
	return fmt.Errorf("%s:%d:%d: not JSON: %w", c.inputName(), line, col, err)
}

func (c *command) inputName() string {
	if c.input == "" || c.input == "-" {
		return "standard input"
	}
	return c.input
}

func lift(ctx context.Context, c *command) error {
	doc, err := c.load(ctx)
	if err != nil {
		return err
	}
	return c.printJSON(doc, false)
}

// health asks the server's health service for the input argument's service ("" for the
// server as a whole) and prints its status; anything but SERVING is transient (exit 5).
func health(ctx context.Context, c *command) error {
	r, err := c.health.Check(ctx, &healthpb.HealthCheckRequest{Service: c.input})
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, r.GetStatus())
	if r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return status.Errorf(codes.Unavailable, "%s", r.GetStatus())
	}
	return nil
}

func plan(ctx context.Context, c *command) error {
	doc, err := c.load(ctx)
	if err != nil {
		return err
	}
	policy, err := c.buildPolicy()
	if err != nil {
		return err
	}
	req := &compactorv1.PlanRequest{Messages: doc.Messages, Policy: policy}
	p, err := c.backend.Plan(ctx, req)
	if err != nil {
		c.fit = c.fitHint(ctx, req, err)
		return err
	}
	if c.full {
		return c.printJSON(p, true)
	}
	_, err = c.stdout.Write(explain(p))
	return err
}

func compact(ctx context.Context, c *command) error {
	doc, err := c.load(ctx)
	if err != nil {
		return err
	}
	policy, err := c.buildPolicy()
	if err != nil {
		return err
	}
	target, _ := parseProvider(c.to) // unspecified without --to
	r, err := c.backend.Compact(ctx, &compactorv1.CompactRequest{Messages: doc.Messages, Policy: policy,
		Summarizer: c.summarizer, Instructions: c.instruct, Force: c.force, TargetProvider: target})
	if err != nil {
		c.fit = c.fitHint(ctx, &compactorv1.PlanRequest{Messages: doc.Messages, Policy: policy}, err)
		return err
	}
	c.warn("compact", r.Warnings)
	if c.full {
		return c.printJSON(r, true)
	}
	if c.diff {
		return c.printDiff(doc.Messages, r)
	}
	if r.Compacted {
		doc.Messages = r.Messages
	} else {
		why := r.Reason
		if why == "" {
			why = r.GetPlan().GetReason()
		}
		fmt.Fprintf(c.stderr, "compactctl: not compacted, the input is printed unchanged: %s\n", why)
	}
	if c.to == "" {
		doc.Warnings = nil
		return c.printJSON(doc, false)
	}
	return c.lowerDoc(ctx, doc)
}

func lower(ctx context.Context, c *command) error {
	doc, err := c.load(ctx)
	if err != nil {
		return err
	}
	return c.lowerDoc(ctx, doc)
}

// lowerDoc prints doc as a body of the --to provider, with the input body's tools and other
// fields: the server writes them in the target's form where it has one and names the rest
// (refusing under --strict); --base-body's fields win over them.
func (c *command) lowerDoc(ctx context.Context, doc *conversation) error {
	to, _ := parseProvider(c.to) // checked by command.check
	base, model := c.withModel(c.base, doc, to)
	r, err := c.backend.Lower(ctx, &compactorv1.LowerRequest{Messages: doc.Messages, Provider: to,
		Model: model, BaseBody: base, Strict: c.strict, RestBody: doc.RestBody, RestProvider: doc.Provider,
		Tools: doc.Tools, ToolChoice: doc.ToolChoice})
	if err != nil {
		return err
	}
	c.warn("lower", r.Warnings)
	// The body as the server wrote it: re-indenting would change the raw JSON of tool-call
	// inputs inside it, so that lifting it again would give another IR and prefix hash.
	_, err = io.WriteString(c.stdout, r.Body+"\n")
	return err
}

// printJSON writes m as indented JSON; with every, fields at their zero value too
// (compacted: false, cut_index: 0), as a response printed whole promises them. protojson
// varies its whitespace on purpose; the output is re-indented so the same result always
// prints the same bytes (string values, raw JSON included, are not touched).
func (c *command) printJSON(m proto.Message, every bool) error {
	b, err := protojson.MarshalOptions{EmitUnpopulated: every}.Marshal(m)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = c.stdout.Write(out.Bytes())
	return err
}

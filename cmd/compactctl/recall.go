package main

import (
	"context"
	"encoding/json"
	"io"

	"github.com/compactord/compactord/recalltool"
	"google.golang.org/grpc/status"
)

// recall prints what a host answers to the model's recall_context call on the input (the
// compacted conversation the model saw): the original messages --citation names, or those
// --query's words match, within --max-tokens (recalltool.Answerer, through Expand).
func recall(ctx context.Context, c *command) error {
	doc, err := c.load(ctx)
	if err != nil {
		return err
	}
	call, err := json.Marshal(recalltool.Call{Citation: c.citation, Query: c.query})
	if err != nil {
		return err
	}
	a := recalltool.Answerer{Client: recalltool.ExpanderFunc(c.backend.Expand), MaxTokens: c.maxTokens}
	answer, err := a.Answer(ctx, doc.GetMessages(), string(call))
	if err != nil {
		if _, ok := status.FromError(err); !ok {
			return inputError{err} // the call is wrong (what the model would be told)
		}
		return err
	}
	_, err = io.WriteString(c.stdout, answer)
	return err
}

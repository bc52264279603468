package service_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/recalltool"
	"github.com/compactord/compactord/service"
)

// A host's loop: it compacts the conversation it keeps, persists what Compact returns (the
// summary message names its source on its last line), answers the model's recall_context
// calls, and later gets back what the compaction folded away, or undoes it, with Expand. A
// gRPC client calls the same methods (and is itself a recalltool.Expander).
func Example_hostLoop() {
	ctx := context.Background()
	srv := service.New(service.Options{})
	conversation := irtest.Conversation(20)
	policy := &compactorv1.Policy{ContextWindow: 8000}

	resp, err := srv.Compact(ctx, &compactorv1.CompactRequest{Messages: conversation, Policy: policy})
	if err != nil {
		log.Fatal(err)
	}
	if resp.GetCompacted() {
		conversation = resp.GetMessages() // persist this instead
	}

	// The model may ask for what was folded: Compact offers it the recall_context tool
	// (resp.GetRecallTool(); LowerRequest.RecallTool writes it beside the body's tools), and
	// the host answers the model's call (its input, as Lift reads it from the model's turn)
	// with the original messages, through Expand.
	recall := recalltool.Answerer{Client: recalltool.ExpanderFunc(srv.Expand)}
	answer, err := recall.Answer(ctx, conversation, `{"citation":"m1–m2"}`)
	if err != nil {
		log.Fatal(err) // a wrong call: tell the model why, as the tool's result
	}
	fmt.Println(resp.GetRecallTool().GetName(), "m1–m2 answers with", strings.Count(answer, resp.GetSourceHash()+" m"), "original messages")

	// What did the summary fold? The summary message alone is enough to ask.
	for _, m := range conversation {
		if m.GetKind() == compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
			covered, err := srv.Expand(ctx, &compactorv1.ExpandRequest{Message: m})
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println("the summary stands for", len(covered.GetMessages()), "original messages")
		}
	}

	// Undo: the whole source is the conversation Compact received, page by page.
	var undone []*compactorv1.Message
	req := &compactorv1.ExpandRequest{SourceHash: resp.GetSourceHash(), PageSize: 8}
	for {
		page, err := srv.Expand(ctx, req)
		if err != nil {
			log.Fatal(err) // NOT_FOUND once --source-ttl has passed
		}
		undone = append(undone, page.GetMessages()...)
		if page.GetNextPageToken() == "" {
			break
		}
		req.PageToken = page.GetNextPageToken()
	}
	fmt.Println("undo restores", len(undone), "messages, compacted to", len(conversation))
	// Output:
	// recall_context m1–m2 answers with 2 original messages
	// the summary stands for 77 original messages
	// undo restores 81 messages, compacted to 23
}

package service_test

import (
	"context"
	"fmt"
	"log"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/service"
)

// A host's loop: it compacts the conversation it keeps, persists what Compact returns (the
// summary message names its source on its last line), and later gets back what the
// compaction folded away, or undoes it, with Expand. A gRPC client calls the same methods.
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
	// the summary stands for 77 original messages
	// undo restores 81 messages, compacted to 23
}

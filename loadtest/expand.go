package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// keptSource is a source a chaos probe kept: its hash and the messages Compact received.
type keptSource struct {
	hash string
	msgs []*compactorv1.Message
}

// keepSources compacts 20 new conversations on replica-1 before a Redis fault and remembers
// the sources they kept, for expands to ask for during and after it.
func (e *chaosEnv) keepSources() []string {
	client, done, err := e.replicaClient()
	if err != nil {
		return []string{"NOT kept: " + err.Error()}
	}
	defer done()
	e.sources = nil
	for range 20 {
		req, err := uniqueRequest(e.miss, e.seq.Add(1))
		if err != nil {
			return []string{"NOT kept: " + err.Error()}
		}
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		resp, err := client.Compact(ctx, req.(*compactorv1.CompactRequest))
		cancel()
		if err == nil && resp.GetSourceHash() != "" {
			e.sources = append(e.sources, keptSource{resp.GetSourceHash(), req.(*compactorv1.CompactRequest).GetMessages()})
		}
	}
	return []string{fmt.Sprintf("kept %d sources of 20 compactions", len(e.sources))}
}

// expands asks replica-1 for every source keepSources kept: under Redis faults a source is
// returned whole (the request's messages, byte for byte) or not at all (UNAVAILABLE with
// RetryInfo, or NOT_FOUND once a restarted Redis has lost it); anything else is a note
// starting with NOT.
func (e *chaosEnv) expands() []string {
	client, done, err := e.replicaClient()
	if err != nil {
		return []string{"NOT expanded: " + err.Error()}
	}
	defer done()
	counts := map[string]int{}
	var bad []string
	for _, src := range e.sources {
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		outcome := expandOne(ctx, client, src)
		cancel()
		switch outcome {
		case "whole", "unavailable", "not found":
			counts[outcome]++
		default:
			bad = append(bad, outcome)
		}
	}
	note := fmt.Sprintf("expand of %d sources: %d whole, %d UNAVAILABLE with RetryInfo, %d NOT_FOUND (lost with a Redis restarted empty)",
		len(e.sources), counts["whole"], counts["unavailable"], counts["not found"])
	if len(bad) > 0 {
		return []string{note, fmt.Sprintf("NOT whole or nothing: %d expands: %s", len(bad), oneLine(fmt.Sprint(bad), 300))}
	}
	return []string{note}
}

// replicaClient is a client of replica-1, and what closes it.
func (e *chaosEnv) replicaClient() (compactorv1.CompactorServiceClient, func(), error) {
	conn, err := grpc.NewClient(e.replicas[0].addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return compactorv1.NewCompactorServiceClient(conn), func() { conn.Close() }, nil
}

// expandOne expands src whole: "whole", "unavailable", "not found", or what went wrong.
func expandOne(ctx context.Context, client compactorv1.CompactorServiceClient, src keptSource) string {
	var got []*compactorv1.Message
	x := &compactorv1.ExpandRequest{SourceHash: src.hash}
	for {
		page, err := client.Expand(ctx, x)
		if err != nil {
			st := status.Convert(err)
			switch {
			case len(got) > 0:
				return fmt.Sprintf("expand: %s after %d messages", st.Code(), len(got))
			case st.Code() == codes.NotFound:
				return "not found"
			}
			for _, d := range st.Details() {
				if _, ok := d.(*errdetails.RetryInfo); ok && st.Code() == codes.Unavailable {
					return "unavailable"
				}
			}
			return "expand: " + st.Code().String()
		}
		got = append(got, page.GetMessages()...)
		if page.GetNextPageToken() == "" {
			break
		}
		x.PageToken = page.GetNextPageToken()
	}
	if len(got) != len(src.msgs) {
		return fmt.Sprintf("expand: %d of %d messages", len(got), len(src.msgs))
	}
	for i, m := range src.msgs {
		a, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(got[i])
		if !bytes.Equal(a, b) {
			return fmt.Sprintf("expand: message %d differs", i)
		}
	}
	return "whole"
}

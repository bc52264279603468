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

// expands compacts 20 new conversations on replica-1 and expands each one's source: under
// Redis faults a source is returned whole (the request's messages, byte for byte) or not at
// all (UNAVAILABLE with RetryInfo, or no source kept, which Compact then said); anything
// else is a note starting with NOT.
func (e *chaosEnv) expands() []string {
	conn, err := grpc.NewClient(e.replicas[0].addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return []string{"NOT expanded: " + err.Error()}
	}
	defer conn.Close()
	client := compactorv1.NewCompactorServiceClient(conn)
	var whole, unavailable, notKept int
	var bad []string
	for range 20 {
		req, err := uniqueRequest(e.miss, e.seq.Add(1))
		if err != nil {
			return []string{"NOT expanded: " + err.Error()}
		}
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		outcome := expandOne(ctx, client, req.(*compactorv1.CompactRequest))
		cancel()
		switch outcome {
		case "whole":
			whole++
		case "unavailable":
			unavailable++
		case "not kept":
			notKept++
		default:
			bad = append(bad, outcome)
		}
		time.Sleep(100 * time.Millisecond)
	}
	note := fmt.Sprintf("expand under Redis faults: %d whole, %d UNAVAILABLE with RetryInfo, %d not kept (Compact said so)", whole, unavailable, notKept)
	if len(bad) > 0 {
		return []string{note, fmt.Sprintf("NOT whole or nothing: %d expands: %s", len(bad), oneLine(fmt.Sprint(bad), 300))}
	}
	return []string{note}
}

// expandOne compacts req and expands its source whole: "whole", "unavailable", "not kept",
// or what went wrong.
func expandOne(ctx context.Context, client compactorv1.CompactorServiceClient, req *compactorv1.CompactRequest) string {
	resp, err := client.Compact(ctx, req)
	if err != nil {
		return "compact: " + status.Code(err).String()
	}
	if resp.GetSourceHash() == "" {
		return "not kept"
	}
	var got []*compactorv1.Message
	x := &compactorv1.ExpandRequest{SourceHash: resp.GetSourceHash()}
	for {
		page, err := client.Expand(ctx, x)
		if err != nil {
			st := status.Convert(err)
			for _, d := range st.Details() {
				if _, ok := d.(*errdetails.RetryInfo); ok && st.Code() == codes.Unavailable && len(got) == 0 {
					return "unavailable"
				}
			}
			return fmt.Sprintf("expand: %s after %d messages", st.Code(), len(got))
		}
		got = append(got, page.GetMessages()...)
		if page.GetNextPageToken() == "" {
			break
		}
		x.PageToken = page.GetNextPageToken()
	}
	if len(got) != len(req.GetMessages()) {
		return fmt.Sprintf("expand: %d of %d messages", len(got), len(req.GetMessages()))
	}
	for i, m := range req.GetMessages() {
		a, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(got[i])
		if !bytes.Equal(a, b) {
			return fmt.Sprintf("expand: message %d differs", i)
		}
	}
	return "whole"
}

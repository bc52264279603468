package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

func text(role compactorv1.Role, s string) *compactorv1.Message {
	return &compactorv1.Message{Role: role, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}}}
}

func call(ids ...string) *compactorv1.Message {
	m := &compactorv1.Message{Role: compactorv1.Role_ROLE_ASSISTANT}
	for _, id := range ids {
		m.Parts = append(m.Parts, &compactorv1.Part{Content: &compactorv1.Part_ToolCall{ToolCall: &compactorv1.ToolCallPart{ToolCallId: id, ToolName: "bash", InputJson: "{}"}}})
	}
	return m
}

func result(id string) *compactorv1.Message {
	return &compactorv1.Message{Role: compactorv1.Role_ROLE_TOOL, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_ToolResult{ToolResult: &compactorv1.ToolResultPart{
		ToolCallId: id, ToolName: "bash", Output: &compactorv1.ToolOutput{Value: &compactorv1.ToolOutput_Text{Text: "ok"}},
	}}}}}
}

func approval(reqID string, resp bool) *compactorv1.Message {
	if resp {
		return &compactorv1.Message{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_ApprovalResponse{ApprovalResponse: &compactorv1.ToolApprovalResponse{ApprovalId: reqID, Approved: true}}}}}
	}
	return &compactorv1.Message{Role: compactorv1.Role_ROLE_ASSISTANT, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_ApprovalRequest{ApprovalRequest: &compactorv1.ToolApprovalRequest{ApprovalId: reqID, ToolCallId: "x"}}}}}
}

func TestTurnCut(t *testing.T) {
	const (
		sys  = compactorv1.Role_ROLE_SYSTEM
		user = compactorv1.Role_ROLE_USER
		asst = compactorv1.Role_ROLE_ASSISTANT
	)
	// 0 system, 1 user, 2 call a, 3 result a, 4 call b+c, 5 result b, 6 result c, 7 text, 8 user
	conv := []*compactorv1.Message{
		text(sys, "s"), text(user, "u"), call("a"), result("a"), call("b", "c"), result("b"), result("c"), text(asst, "done"), text(user, "next"),
	}
	tests := []struct {
		n, want int
		wantErr bool
	}{
		{n: 0, want: 9},  // whole
		{n: 9, want: 9},  // whole
		{n: 20, want: 9}, // more than there is
		{n: 1, want: 1},  // the system message alone
		{n: 3, want: 2},  // a call without its result is dropped with it
		{n: 4, want: 4},  // call and result
		{n: 5, want: 4},  // call b+c open
		{n: 6, want: 4},  // c still open
		{n: 7, want: 7},  // both answered
		{n: 8, want: 8},  // the assistant's text
		{n: 2, want: 2},  // next message is a call, not a result: fine
	}
	for _, tt := range tests {
		got, err := turnCut(conv, tt.n)
		if err != nil || got != tt.want {
			t.Errorf("turnCut(n=%d) = %d, %v; want %d", tt.n, got, err, tt.want)
		}
	}
	// A leading call whose result lies beyond n leaves no boundary.
	if _, err := turnCut([]*compactorv1.Message{call("a"), result("a"), text(user, "u")}, 1); err == nil {
		t.Error("turnCut over an open call: no error")
	}
	// A pending approval is never cut from its response.
	withApproval := []*compactorv1.Message{text(user, "u"), approval("p1", false), approval("p1", true), text(user, "u2")}
	if got, err := turnCut(withApproval, 2); err != nil || got != 1 {
		t.Errorf("turnCut over a pending approval = %d, %v; want 1", got, err)
	}
	if got, err := turnCut(withApproval, 3); err != nil || got != 3 {
		t.Errorf("turnCut after an answered approval = %d, %v; want 3", got, err)
	}
}

func TestUniqueRequest(t *testing.T) {
	base := &compactorv1.CompactRequest{Messages: []*compactorv1.Message{
		text(compactorv1.Role_ROLE_SYSTEM, "system"), text(compactorv1.Role_ROLE_USER, "fix the bug"), call("a"), result("a"),
	}}
	orig := proto.Clone(base)
	a, err := uniqueRequest(base, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := uniqueRequest(base, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(base, orig) {
		t.Error("uniqueRequest changed its input")
	}
	if proto.Equal(a, b) {
		t.Error("two request numbers gave the same request")
	}
	ua := a.(*compactorv1.CompactRequest).GetMessages()
	if got := ua[1].GetParts()[0].GetText().GetText(); got != "[loadtest request 1] fix the bug" {
		t.Errorf("user text %q", got)
	}
	if !proto.Equal(ua[0], base.Messages[0]) || !proto.Equal(ua[2], base.Messages[2]) {
		t.Error("messages other than the first user message changed")
	}
	if _, err := uniqueRequest(&compactorv1.CompactRequest{Messages: []*compactorv1.Message{call("a"), result("a")}}, 1); err == nil {
		t.Error("no user text: no error")
	}
}

func TestMethodTypesAndProtoset(t *testing.T) {
	in, out, err := methodTypes("compactor.v1.CompactorService/Compact")
	if err != nil || in.Descriptor().FullName() != "compactor.v1.CompactRequest" || out.Descriptor().FullName() != "compactor.v1.CompactResponse" {
		t.Fatalf("methodTypes = %v, %v, %v", in, out, err)
	}
	for _, bad := range []string{"compactor.v1.CompactorService/Nope", "compactor.v1.Nope/Plan", "compactor.v1.CompactRequest/Plan", "Plan"} {
		if _, _, err := methodTypes(bad); err == nil {
			t.Errorf("methodTypes(%q): no error", bad)
		}
	}
	b, err := descriptorSet()
	if err != nil {
		t.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		t.Fatal(err)
	}
	have := map[string]int{}
	for i, f := range set.GetFile() {
		have[f.GetName()] = i
	}
	for _, want := range []string{"compactor/v1/compactor.proto", "compactor/v1/conversation.proto", "grpc/health/v1/health.proto", "google/protobuf/struct.proto"} {
		if _, ok := have[want]; !ok {
			t.Errorf("protoset lacks %s (has %v)", want, have)
		}
	}
	// Dependencies come before the files that import them.
	if have["compactor/v1/conversation.proto"] > have["compactor/v1/compactor.proto"] {
		t.Error("conversation.proto after compactor.proto")
	}
}

func TestLoadCodec(t *testing.T) {
	a := &compactorv1.PlanRequest{Messages: []*compactorv1.Message{text(compactorv1.Role_ROLE_USER, "a")}}
	b := &compactorv1.PlanRequest{Messages: []*compactorv1.Message{text(compactorv1.Role_ROLE_USER, "bb")}}
	want := func(m proto.Message) []byte {
		out, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, memo := range []bool{true, false} {
		c := newLoadCodec(memo)
		for i, m := range []proto.Message{a, a, b, a} {
			bs, err := c.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if got := bs.Materialize(); !bytes.Equal(got, want(m)) {
				t.Errorf("memo=%v call %d: bytes differ from proto.Marshal", memo, i)
			}
		}
		if err := c.Unmarshal(nil, &compactorv1.PlanResponse{}); err != nil {
			t.Error(err)
		}
	}
	// With gen, every request is gen's bytes, whatever message ghz hands over.
	c := newLoadCodec(true)
	n := int64(0)
	c.gen = func() ([]byte, error) {
		n++
		req, err := uniqueRequest(a, n)
		if err != nil {
			return nil, err
		}
		return proto.Marshal(req)
	}
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		bs, err := c.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		var got compactorv1.PlanRequest
		if err := proto.Unmarshal(bs.Materialize(), &got); err != nil {
			t.Fatal(err)
		}
		text := got.GetMessages()[0].GetParts()[0].GetText().GetText()
		if seen[text] || !strings.HasSuffix(text, "] a") {
			t.Errorf("call %d: first user text %q (seen before: %v)", i, text, seen[text])
		}
		seen[text] = true
	}
}

func TestFakeLLM(t *testing.T) {
	f := &FakeLLM{Latency: time.Millisecond}
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	post := func(path, body string) (*http.Response, []byte) {
		t.Helper()
		resp, err := http.Post(strings.TrimSuffix(f.BaseURL(), "/v1")+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	resp, b := post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"summarize"}]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var cc struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &cc); err != nil {
		t.Fatal(err)
	}
	if cc.Object != "chat.completion" || cc.Model != "m" || len(cc.Choices) != 1 || cc.Choices[0].Message.Content != fakeSummary ||
		cc.Choices[0].FinishReason != "stop" || cc.Usage.CompletionTokens == 0 {
		t.Errorf("response %s", b)
	}
	resp, b = post("/v1/chat/completions", `{"model":"m","stream":true,"messages":[]}`)
	if resp.StatusCode != http.StatusOK || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Errorf("stream: status %d body %q", resp.StatusCode, b)
	}
	var streamed strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		for _, c := range chunk.Choices {
			streamed.WriteString(c.Delta.Content)
		}
	}
	if streamed.String() != fakeSummary {
		t.Errorf("streamed %q", streamed.String())
	}
	if f.Calls() != 2 || f.failed.Load() != 0 {
		t.Errorf("calls %d failed %d, want 2 and 0", f.Calls(), f.failed.Load())
	}
	if resp, _ := post("/v1/responses", `{}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/v1/responses: status %d", resp.StatusCode)
	}
	if resp, _ := post("/v1/chat/completions", `not json`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad body: status %d", resp.StatusCode)
	}
	if f.Calls() != 2 || f.failed.Load() != 2 {
		t.Errorf("calls %d failed %d, want 2 and 2", f.Calls(), f.failed.Load())
	}
}

func TestProcStats(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	if k, err := rssKiB(os.Getpid()); err != nil || k <= 0 {
		t.Errorf("rssKiB = %d, %v", k, err)
	}
	// Burn a little CPU so the counter has something to show.
	x := 0
	for i := 0; i < 50_000_000; i++ {
		x += i % 7
	}
	if c, err := cpuTime(os.Getpid()); err != nil || c <= 0 {
		t.Errorf("cpuTime = %s, %v (%d)", c, err, x)
	}
	if _, err := rssKiB(-1); err == nil {
		t.Error("rssKiB of no process: no error")
	}
}

package format

import (
	"fmt"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

func TestSelectMessages(t *testing.T) {
	conv := func() []*compactorv1.Message {
		return []*compactorv1.Message{
			sysMsg("static"),          // 0
			dynamic(sysMsg("todo A")), // 1
			userMsg(tx("u1")),         // 2
			asstMsg(tx("a1")),         // 3
			dynamic(sysMsg("todo B")), // 4
			userMsg(tx("u2")),         // 5
			asstMsg(tx("a2")),         // 6
		}
	}
	render := func(sel []src) string {
		var b []string
		for _, s := range sel {
			t, _ := textOf(s.m.GetParts()[0])
			b = append(b, fmt.Sprintf("%d:%s", s.i, t))
		}
		return strings.Join(b, " ")
	}
	cases := []struct {
		name    string
		session *compactorv1.Session
		want    string
		cursor  int32
	}{
		{"no session", nil, "0:static 1:todo A 2:u1 3:a1 4:todo B 5:u2 6:a2", 6},
		{"inactive", &compactorv1.Session{Cursor: 3}, "0:static 1:todo A 2:u1 3:a1 4:todo B 5:u2 6:a2", 6},
		{"cursor mid", &compactorv1.Session{Active: true, Cursor: 3},
			"1:[System Context]: todo A 4:[System Context]: todo B 5:u2 6:a2", 6},
		{"cursor at start", &compactorv1.Session{Active: true, Cursor: 0},
			"1:[System Context]: todo A 2:u1 3:a1 4:[System Context]: todo B 5:u2 6:a2", 6},
		{"cursor at last", &compactorv1.Session{Active: true, Cursor: 6},
			"1:[System Context]: todo A 4:[System Context]: todo B", 6},
		{"cursor past end", &compactorv1.Session{Active: true, Cursor: 7}, "0:static 1:todo A 2:u1 3:a1 4:todo B 5:u2 6:a2", 6},
		{"negative cursor", &compactorv1.Session{Active: true, Cursor: -1}, "0:static 1:todo A 2:u1 3:a1 4:todo B 5:u2 6:a2", 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sel, cursor := selectMessages(&compactorv1.LowerRequest{Messages: conv(), Session: c.session})
			if got := render(sel); got != c.want {
				t.Errorf("sent %q\nwant %q", got, c.want)
			}
			if cursor != c.cursor {
				t.Errorf("cursor %d, want %d", cursor, c.cursor)
			}
		})
	}
}

// TestSelectMessagesKinds: by default preface + latest summary + what follows; compaction
// prompts never; keep_history sends everything, in a session delta too.
func TestSelectMessagesKinds(t *testing.T) {
	msgs := []*compactorv1.Message{
		sysMsg("sys"), // 0
		kind(userMsg(tx("preface")), compactorv1.MessageKind_MESSAGE_KIND_SESSION_PREFACE), // 1
		userMsg(tx("old")), // 2
		kind(userMsg(tx("summary 1")), compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY), // 3
		userMsg(tx("middle")), // 4
		kind(userMsg(tx("prompt")), compactorv1.MessageKind_MESSAGE_KIND_COMPACT_PROMPT),     // 5
		kind(userMsg(tx("summary 2")), compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY), // 6
		userMsg(tx("new")), // 7
	}
	idx := func(sel []src) []int {
		var out []int
		for _, s := range sel {
			out = append(out, s.i)
		}
		return out
	}
	sel, _ := selectMessages(&compactorv1.LowerRequest{Messages: msgs})
	if got := fmt.Sprint(idx(sel)); got != "[0 1 6 7]" {
		t.Errorf("default: %s", got)
	}
	sel, _ = selectMessages(&compactorv1.LowerRequest{Messages: msgs, KeepHistory: true})
	if got := fmt.Sprint(idx(sel)); got != "[0 1 2 3 4 5 6 7]" {
		t.Errorf("keep_history: %s", got)
	}
	sel, c := selectMessages(&compactorv1.LowerRequest{Messages: msgs, Session: &compactorv1.Session{Active: true, Cursor: 4}})
	if got := fmt.Sprint(idx(sel)); got != "[6 7]" || c != 7 {
		t.Errorf("session after cursor 4: %s, cursor %d", got, c)
	}
}

func ExampleLower() {
	resp, err := Lower(&compactorv1.LowerRequest{
		Provider: compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES,
		BaseBody: `{"model":"claude-sonnet-4-5","max_tokens":1024}`,
		Messages: []*compactorv1.Message{
			{Role: compactorv1.Role_ROLE_SYSTEM, Parts: []*compactorv1.Part{textPart("Be brief.")}},
			{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{textPart("Hi!")}},
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.GetBody())
	// Output:
	// {"model":"claude-sonnet-4-5","max_tokens":1024,"system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"Hi!"}]}]}
}

func ExampleLift() {
	resp, err := Lift(&compactorv1.LiftRequest{Body: `{"model":"gpt-4o","messages":[
		{"role":"user","content":"weather?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"sunny"}]}`})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.GetProvider(), len(resp.GetMessages()), resp.GetRestBody())
	for _, m := range resp.GetMessages() {
		fmt.Println(m.GetRole(), len(m.GetParts()))
	}
	// Output:
	// PROVIDER_OPENAI_CHAT 3 {"model":"gpt-4o"}
	// ROLE_USER 1
	// ROLE_ASSISTANT 1
	// ROLE_TOOL 1
}

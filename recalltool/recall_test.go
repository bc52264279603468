package recalltool

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"google.golang.org/grpc"
)

const (
	hashA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	hashB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func TestParseCitation(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Citation
		bad  bool
	}{
		{in: "m12", want: Citation{Range: "m12"}},
		{in: "m12–m18", want: Citation{Range: "m12–m18"}},
		{in: "m12–18", want: Citation{Range: "m12–18"}},
		{in: " [m12-m18] ", want: Citation{Range: "m12-m18"}},
		{in: "12-18", want: Citation{Range: "12-18"}},
		{in: hashA + " m3", want: Citation{Source: hashA, Range: "m3"}},
		{in: strings.ToUpper(hashA) + ":m3-m4", want: Citation{Source: hashA, Range: "m3-m4"}},
		{in: "compactord source " + hashB + " m0–m40", want: Citation{Source: hashB, Range: "m0–m40"}},
		{in: "[compactord source " + hashB + " m0–m40: the original messages, for Expand]", want: Citation{Source: hashB, Range: "m0–m40"}},
		{in: "[s1a2b3c4d m12–18]", want: Citation{Range: "s1a2b3c4d m12–18"}},
		{in: "", bad: true},
		{in: "the deploy step", bad: true},
		{in: "abc m3", bad: true},
	} {
		got, err := ParseCitation(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("ParseCitation(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.bad)
		}
	}
}

func TestParseCall(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Call
		err  bool
	}{
		{in: `{"citation":" m3 "}`, want: Call{Citation: "m3"}},
		{in: `{"query":"deploy token"}`, want: Call{Query: "deploy token"}},
		{in: `{}`, err: true},
		{in: `{"citation":3}`, err: true},
		{in: `not json`, err: true},
	} {
		got, err := ParseCall(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseCall(%s) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// store is an Expander over sources held in memory, a page of two messages at a time.
type store map[string][]*compactorv1.Message

func (s store) Expand(_ context.Context, in *compactorv1.ExpandRequest, _ ...grpc.CallOption) (*compactorv1.ExpandResponse, error) {
	msgs, ok := s[in.GetSourceHash()]
	if !ok {
		return nil, errors.New("not found")
	}
	first, last := 0, len(msgs)-1
	if r := strings.Trim(in.GetRange(), "[]"); r != "" {
		f := strings.FieldsFunc(r, func(c rune) bool { return c < '0' || c > '9' })
		first, _ = strconv.Atoi(f[0])
		last = first
		if len(f) > 1 {
			last, _ = strconv.Atoi(f[1])
		}
	}
	from := first
	if in.GetPageToken() != "" {
		from, _ = strconv.Atoi(in.GetPageToken())
	}
	to := min(from+2, last+1)
	resp := &compactorv1.ExpandResponse{FirstIndex: int32(from), Messages: msgs[from:to], SourceHash: in.GetSourceHash()}
	if to <= last {
		resp.NextPageToken = strconv.Itoa(to)
	}
	return resp, nil
}

func text(role compactorv1.Role, s string) *compactorv1.Message {
	return &compactorv1.Message{Role: role, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: s}}}}}
}

func summary(s string) *compactorv1.Message {
	m := text(compactorv1.Role_ROLE_USER, s)
	m.Kind = compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY
	return m
}

// fixture is a conversation compacted twice: source B's m0 is the first summary, of source
// A; the compacted conversation's summary names B.
func fixture() (store, []*compactorv1.Message) {
	u, a := compactorv1.Role_ROLE_USER, compactorv1.Role_ROLE_ASSISTANT
	st := store{
		hashA: {
			text(u, "Deploy the service to staging."),
			text(a, "Deploying with token DEPLOY-7731 to staging-eu."),
			text(u, "Now check the logs."),
			text(a, "The logs show a timeout in the deploy step of staging-eu."),
		},
	}
	st[hashB] = []*compactorv1.Message{
		summary("We deployed to staging.\n[compactord source " + hashA + " m0–m3: the original messages, for Expand]"),
		text(u, "Fix the timeout."),
		text(a, "Raised the timeout to 30s."),
		text(u, "Thanks."),
	}
	conv := []*compactorv1.Message{
		summary("Deployed, fixed a timeout.\n[compactord source " + hashB + " m0–m2: the original messages, for Expand]"),
		text(u, "Thanks."),
	}
	return st, conv
}

func TestAnswerCitation(t *testing.T) {
	st, conv := fixture()
	a := Answerer{Client: st}
	for _, tt := range []struct{ input, want string }{
		{`{"citation":"m1–m2"}`, "[" + hashB + " m1 user]\nFix the timeout.\n[" + hashB + " m2 assistant]\nRaised the timeout to 30s.\n"},
		{`{"citation":"` + hashA + ` m1"}`, "[" + hashA + " m1 assistant]\nDeploying with token DEPLOY-7731 to staging-eu.\n"},
	} {
		got, err := a.Answer(t.Context(), conv, tt.input)
		if err != nil || got != tt.want {
			t.Errorf("Answer(%s) = %q, %v; want %q", tt.input, got, err, tt.want)
		}
	}
	if _, err := a.Answer(t.Context(), conv[1:], `{"citation":"m1"}`); err == nil {
		t.Error("a citation with no source in a conversation naming none: no error")
	}
}

func TestAnswerQuery(t *testing.T) {
	st, conv := fixture()
	got, err := Answerer{Client: st}.Search(t.Context(), conv, "staging-eu timeout")
	if err != nil {
		t.Fatal(err)
	}
	// Both words (a3) first, then one word, newest first; b0 (the first summary) names
	// neither word, and A's messages are read through it.
	if got, want := positions(got), "a3 b2 b1 a1"; got != want {
		t.Errorf("Search order = %s, want %s", got, want)
	}
	// Bounded: an answer of 40 tokens holds the best match (36) and says what it left out.
	ans, err := Answerer{Client: st, MaxTokens: 40}.Answer(t.Context(), conv, `{"query":"staging-eu timeout"}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ans, "The logs show a timeout") || strings.Contains(ans, "Raised") || !strings.Contains(ans, "[3 more not shown") {
		t.Errorf("bounded answer:\n%s", ans)
	}
	if approxTokens(len(ans)) > 40+20 {
		t.Errorf("bounded answer of %d tokens", approxTokens(len(ans)))
	}
	// The best match alone over the budget is cut to fit.
	ans, err = Answerer{Client: st, MaxTokens: 32}.Answer(t.Context(), conv, `{"query":"staging-eu timeout"}`)
	if err != nil || approxTokens(len(ans)) > 32+20 || !strings.Contains(ans, "for all of it]") {
		t.Errorf("bounded answer of %d tokens: %q, %v", approxTokens(len(ans)), ans, err)
	}
	ans, err = Answerer{Client: st}.Answer(t.Context(), conv, `{"query":"kubernetes"}`)
	if err != nil || !strings.HasPrefix(ans, "No compacted-away message matches") {
		t.Errorf("a query nothing matches: %q, %v", ans, err)
	}
}

func TestSources(t *testing.T) {
	st, conv := fixture()
	got, err := Answerer{Client: st}.Sources(t.Context(), conv)
	if err != nil {
		t.Fatal(err)
	}
	// The range the conversation names (B's m0–m2), then the one B's m0 names (A's m0–m3).
	if got, want := positions(got), "b0 b1 b2 a0 a1 a2 a3"; got != want {
		t.Errorf("Sources = %s, want %s", got, want)
	}
}

// positions writes where each of ss is, its source's first letter and its index: "a3 b2".
func positions(ss []Source) string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Hash[:1]+strconv.Itoa(s.Index))
	}
	return strings.Join(out, " ")
}

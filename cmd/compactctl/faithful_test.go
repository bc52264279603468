package main

import (
	"slices"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/format"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/service"
	"google.golang.org/protobuf/proto"
)

// TestBodiesAreByteFaithful: for every corpus conversation and every provider, the body
// `compactctl lower` prints is the server's body byte for byte (plus a newline), so lifting
// what compactctl printed gives back the IR and the prefix hash that lifting the server's
// body gives, and for the conversation's own provider the IR it was lowered from.
// (Re-indenting the body rewrites the raw JSON of tool-call inputs, which the IR keeps byte
// for byte and the prefix hash covers.)
func TestBodiesAreByteFaithful(t *testing.T) {
	ctx := t.Context()
	srv := service.New(service.Options{})
	// A plan that summarizes, to compare prefix hashes: act above one token, no pruning.
	policy := &compactorv1.Policy{ContextWindow: 1 << 24, TriggerTokens: 1, Prune: &compactorv1.PrunePolicy{Disabled: true}}
	prefix := func(msgs []*compactorv1.Message) string {
		p, err := srv.Plan(ctx, &compactorv1.PlanRequest{Messages: msgs, Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		return p.GetPrefixHash()
	}
	hashed := 0
	for _, f := range corpus.Files(t) {
		doc, err := srv.Lift(ctx, &compactorv1.LiftRequest{Body: string(corpus.Read(t, f))})
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		for v := range compactorv1.Provider_name {
			p := compactorv1.Provider(v)
			name := format.ProviderName(p)
			if _, ok := format.ParseProvider(name); !ok {
				continue // PROVIDER_UNSPECIFIED
			}
			r := ctl(t, nil, "", "--local", "lower", "--to", name, f.Path)
			if r.code != exitOK {
				t.Fatalf("%s to %s: %+v", f.Name, name, r)
			}
			want, err := srv.Lower(ctx, &compactorv1.LowerRequest{Messages: doc.GetMessages(), Provider: p, RestBody: doc.GetRestBody(),
				RestProvider: doc.GetProvider(), Tools: doc.GetTools(), ToolChoice: doc.GetToolChoice()})
			if err != nil {
				t.Fatal(err)
			}
			if r.stdout != want.GetBody()+"\n" {
				t.Errorf("%s to %s: compactctl printed another body than the server's", f.Name, name)
				continue
			}
			printed, err := srv.Lift(ctx, &compactorv1.LiftRequest{Body: r.stdout, Provider: p})
			if err != nil {
				t.Fatalf("%s to %s: lifting what compactctl printed: %v", f.Name, name, err)
			}
			server, err := srv.Lift(ctx, &compactorv1.LiftRequest{Body: want.GetBody(), Provider: p})
			if err != nil {
				t.Fatal(err)
			}
			if !equalMessages(printed.GetMessages(), server.GetMessages()) {
				t.Errorf("%s to %s: lift of the printed body differs from lift of the server's", f.Name, name)
			}
			if p == doc.GetProvider() && !equalMessages(printed.GetMessages(), doc.GetMessages()) {
				t.Errorf("%s to its own %s: lift after lower changed the IR", f.Name, name)
			}
			if h := prefix(printed.GetMessages()); h != prefix(server.GetMessages()) {
				t.Errorf("%s to %s: prefix hash %s, the server's body's %s", f.Name, name, h, prefix(server.GetMessages()))
			} else if h != "" {
				hashed++
			}
		}
	}
	if hashed == 0 {
		t.Error("no plan summarized: the prefix hashes compared were all empty")
	}
}

// equalMessages compares two conversations message by message.
func equalMessages(a, b []*compactorv1.Message) bool {
	return slices.EqualFunc(a, b, func(m, n *compactorv1.Message) bool { return proto.Equal(m, n) })
}

package engine

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine/tokenizer"
)

// TestPlanMemoReturnsFreshCopies: once a conversation is memoized, Plan remembers its plan
// under a policy and answers the same request with a copy, which the caller may modify.
func TestPlanMemoReturnsFreshCopies(t *testing.T) {
	c := NewCounter(8 << 20)
	base := conversation200()
	p := &compactorv1.Policy{ContextWindow: 16000}
	want, err := Plan(base, p, NewCounter(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		r, err := Plan(decoded(t, base), p, c)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(r, want) {
			t.Fatalf("plan %d differs from a cold plan", i+1)
		}
		// The caller owns the response.
		r.Dispositions[0], r.MessageTokens[0], r.Reason = compactorv1.Disposition_DISPOSITION_DROP, -1, "changed"
	}
	if n, _ := c.plans.memo.stats(); n != 1 {
		t.Errorf("the plan memo holds %d plans, want 1", n)
	}
}

// TestPlanMemoKeysOnPolicyCountsAndContent: a request that differs from a remembered one in
// its policy (any field, the excluded tools included), its caller token counts or its content
// gets its own plan.
func TestPlanMemoKeysOnPolicyCountsAndContent(t *testing.T) {
	c := NewCounter(8 << 20)
	base := conversation200()
	p := &compactorv1.Policy{ContextWindow: 40000}
	excludeOther := &compactorv1.Policy{ContextWindow: 40000, Prune: &compactorv1.PrunePolicy{ExcludeTools: []string{"grep"}}}
	for range 3 {
		for _, p := range []*compactorv1.Policy{p, excludeOther} {
			if _, err := Plan(decoded(t, base), p, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	withCounts := decoded(t, base)
	withCounts[7].TokenCount = 5000
	oneByte := decoded(t, base)
	oneByte[9].Parts[0].GetToolResult().GetOutput().Value = &compactorv1.ToolOutput_Text{Text: "short now"}
	tests := []struct {
		name string
		msgs []*compactorv1.Message
		p    *compactorv1.Policy
	}{
		{"window", base, &compactorv1.Policy{ContextWindow: 40001}},
		{"trigger ratio", base, &compactorv1.Policy{ContextWindow: 40000, TriggerRatio: 0.7}},
		{"keep recent turns", base, &compactorv1.Policy{ContextWindow: 40000, KeepRecentTurns: 3}},
		{"tokenizer", base, &compactorv1.Policy{ContextWindow: 40000, Tokenizer: "cl100k_base"}},
		{"reported usage", base, &compactorv1.Policy{ContextWindow: 40000, ReportedUsage: &compactorv1.Usage{InputTokens: 30000, MessageCount: 150}}},
		{"exclude tools", base, &compactorv1.Policy{ContextWindow: 40000, Prune: &compactorv1.PrunePolicy{ExcludeTools: []string{"read_file"}}}},
		{"clear inputs", base, &compactorv1.Policy{ContextWindow: 40000, Prune: &compactorv1.PrunePolicy{ClearInputs: true}}},
		{"caller token count", withCounts, p},
		{"content", oneByte, p},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plansEqualCold(t, c, tt.msgs, tt.p, 3)
		})
	}
}

// TestPlanMemoWithCallerCounts: when the caller counts every message, Plan still remembers
// the plans of a conversation seen before, whatever they decide, and answers equal cold
// plans.
func TestPlanMemoWithCallerCounts(t *testing.T) {
	counted := conversation200()
	c0 := NewCounter(0)
	for _, m := range counted {
		n, err := c0.Message(m, "")
		if err != nil {
			t.Fatal(err)
		}
		m.TokenCount = n
	}
	for _, tt := range []struct {
		name   string
		window int64
	}{{"none", 200000}, {"prune", 40000}, {"summarize", 16000}} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCounter(8 << 20)
			p := &compactorv1.Policy{ContextWindow: tt.window}
			plansEqualCold(t, c, counted, p, 4)
			if n, _ := c.plans.memo.stats(); n != 1 {
				t.Errorf("the plan memo holds %d plans, want 1", n)
			}
		})
	}
}

// plansEqualCold plans a decoded copy of msgs n times with c and fails unless every plan
// equals a cold one (planned with a fresh Counter).
func plansEqualCold(t *testing.T, c *Counter, msgs []*compactorv1.Message, p *compactorv1.Policy, n int) {
	t.Helper()
	want, err := Plan(msgs, p, NewCounter(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		got, err := Plan(decoded(t, msgs), p, c)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("plan %d differs from a cold plan: %s", i+1, got.GetReason())
		}
	}
}

// TestPlanMemoSkipsConversationsSeenOnce: a growing conversation, planned once per new
// message, leaves no plan behind.
func TestPlanMemoSkipsConversationsSeenOnce(t *testing.T) {
	c := NewCounter(8 << 20)
	base := conversation200()
	p := &compactorv1.Policy{ContextWindow: 16000}
	for n := 150; n <= len(base); n++ {
		if _, err := Plan(base[:n], p, c); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := c.plans.memo.stats(); n != 0 {
		t.Errorf("the plan memo holds %d plans", n)
	}
}

// TestCopyPlanResponseCopiesEveryField sets every field of a PlanResponse and checks that the
// copy equals it and shares no list; it fails when a field is added and not copied.
func TestCopyPlanResponseCopiesEveryField(t *testing.T) {
	r := &compactorv1.PlanResponse{}
	m := r.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		var v protoreflect.Value
		switch fd.Kind() {
		case protoreflect.EnumKind:
			v = protoreflect.ValueOfEnum(protoreflect.EnumNumber(1 + i))
		case protoreflect.StringKind:
			v = protoreflect.ValueOfString(string(fd.Name()))
		case protoreflect.Int32Kind:
			v = protoreflect.ValueOfInt32(int32(100 + i))
		case protoreflect.Int64Kind:
			v = protoreflect.ValueOfInt64(int64(1000 + i))
		case protoreflect.DoubleKind:
			v = protoreflect.ValueOfFloat64(float64(i) + 0.5)
		default:
			t.Fatalf("PlanResponse.%s: kind %v not handled by this test", fd.Name(), fd.Kind())
		}
		if fd.IsList() {
			l := m.Mutable(fd).List()
			l.Append(v)
			l.Append(v)
			continue
		}
		m.Set(fd, v)
	}
	cp := copyPlanResponse(r)
	if !proto.Equal(cp, r) {
		t.Fatalf("the copy differs:\n%v\n%v", cp, r)
	}
	cp.Dispositions[0], cp.MessageTokens[0] = 0, 0
	if r.Dispositions[0] == 0 || r.MessageTokens[0] == 0 {
		t.Errorf("the copy shares a list with the original")
	}
}

// TestPolicyEqualCoversEveryField fails when a field is added to policy without deciding how
// policy.equal and policyHash treat it.
func TestPolicyEqualCoversEveryField(t *testing.T) {
	if n := reflect.TypeOf(policy{}).NumField(); n != 28 {
		t.Errorf("policy has %d fields: update policy.equal, policyHash and this test", n)
	}
	base, err := resolved(&compactorv1.Policy{ContextWindow: 100000, Prune: &compactorv1.PrunePolicy{ExcludeTools: []string{"a"}}})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCounter(1 << 20)
	for i, change := range []func(p *policy){
		func(p *policy) { p.window++ }, func(p *policy) { p.reserve++ }, func(p *policy) { p.usable++ },
		func(p *policy) { p.trigger++ }, func(p *policy) { p.target++ }, func(p *policy) { p.triggerRatio += 0.01 },
		func(p *policy) { p.keepTokens++ }, func(p *policy) { p.keepTurns++ }, func(p *policy) { p.summaryRoom++ }, func(p *policy) { p.keepRequests++ }, func(p *policy) { p.roomGrows = !p.roomGrows },
		func(p *policy) { p.tokenizer = tokenizer.Approx }, func(p *policy) { p.usageTokens++ }, func(p *policy) { p.usageCount++ },
		func(p *policy) { p.pruneOff = true }, func(p *policy) { p.keepResults++ }, func(p *policy) { p.minOutput++ },
		func(p *policy) { p.excludeTools = []string{"b"} }, func(p *policy) { p.clearInputs = true },
		func(p *policy) { p.clearAtLeast++ },
		func(p *policy) { p.targetFromTurns = !p.targetFromTurns }, func(p *policy) { p.headroomTurns++ },
		func(p *policy) { p.cacheRead += 0.01 }, func(p *policy) { p.cacheWrite += 0.01 },
		func(p *policy) { p.source = "5eed" }, func(p *policy) { p.refTokens++ },
		func(p *policy) { p.markerTokens++ }, func(p *policy) { p.sourceMessages++ },
	} {
		p := *base
		change(&p)
		if p.equal(base) || base.equal(&p) {
			t.Errorf("change %d: policies still equal", i)
		}
		if policyHash(&c.keys, &p) == policyHash(&c.keys, base) {
			t.Errorf("change %d: same policy hash", i)
		}
	}
	same := *base
	same.excludeTools = []string{"a"}
	if !same.equal(base) || policyHash(&c.keys, &same) != policyHash(&c.keys, base) {
		t.Errorf("equal policies differ")
	}
}

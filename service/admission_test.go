package service_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/internal/irtest"
	"github.com/compactord/compactord/internal/llmtest"
	"github.com/compactord/compactord/limit"
	"github.com/compactord/compactord/service"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// countingAdmitter is a limit.Shedder that counts the calls it admitted and the slots still
// held.
type countingAdmitter struct {
	*limit.Shedder
	admitted, held atomic.Int64
}

func (c *countingAdmitter) AdmitCall(ctx context.Context) (func(), error) {
	release, err := c.Shedder.AdmitCall(ctx)
	if err != nil {
		return nil, err
	}
	c.admitted.Add(1)
	c.held.Add(1)
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			c.held.Add(-1)
			release()
		}
	}, nil
}

// eventually waits up to 5 s for cond.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestWaitersGiveTheirSlotBack: at --max-inflight 2, one Compact waits on its model and two
// more wait for the same summary; none of them is doing engine work, so a Plan from another
// caller is served, not shed.
func TestWaitersGiveTheirSlotBack(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	arrived, release := llm.Hold()
	defer release()
	calls := &countingAdmitter{Shedder: limit.NewShedder(limit.ShedOptions{MaxCPU: 2, MaxLLM: 8})}
	client := startReplica(t, replicaConfig{llm: llm, calls: calls, cache: cache.NewMemory(cache.MemoryOptions{}),
		admit: limit.Admission{Shedder: calls.Shedder}})
	req := compactReq(irtest.Conversation(20))
	done := make(chan error, 3)
	compact := func() {
		_, err := client.Compact(t.Context(), req)
		done <- err
	}
	go compact()
	<-arrived // the leader waits on its model
	go compact()
	go compact()
	if !eventually(func() bool { return calls.admitted.Load() == 3 && calls.held.Load() == 0 }) {
		t.Errorf("%d calls admitted, %d slots held by calls waiting on a summary, want 3 and 0", calls.admitted.Load(), calls.held.Load())
	}
	if _, err := client.Plan(t.Context(), &compactorv1.PlanRequest{Messages: irtest.Conversation(4), Policy: policy()}); err != nil {
		t.Errorf("a Plan while Compacts wait on a summary: %v", err)
	}
	release()
	for range 3 {
		if err := <-done; err != nil {
			t.Errorf("Compact: %v", err)
		}
	}
	if n := llm.Calls(); n != 1 {
		t.Errorf("%d LLM calls, want 1", n)
	}
}

// TestCompactLeaseOutlivesCaller: a Compact whose caller goes keeps its tenant's
// concurrent_compacts lease while its summarization runs on, so cancelling and resubmitting
// cannot run more summarizations than the limit allows; the lease goes back when the
// summarization ends.
func TestCompactLeaseOutlivesCaller(t *testing.T) {
	llm := llmtest.NewOpenAI(t)
	arrived, release := llm.Hold()
	defer release()
	enf := limit.New(limit.Config{Default: limit.Quota{ConcurrentCompacts: 1}}, limit.Options{})
	client := startReplica(t, replicaConfig{llm: llm, cache: cache.NewMemory(cache.MemoryOptions{}),
		unary: []grpc.UnaryServerInterceptor{enf.UnaryServerInterceptor()}})
	tenant := metadata.AppendToOutgoingContext(t.Context(), "x-compactor-tenant", "acme")

	ctx, cancel := context.WithCancel(tenant)
	first := make(chan error, 1)
	go func() {
		_, err := client.Compact(ctx, compactReq(irtest.Conversation(20)))
		first <- err
	}()
	<-arrived
	cancel()
	if err := <-first; status.Code(err) != codes.Canceled {
		t.Fatalf("the cancelled Compact: %v", err)
	}
	other := compactReq(irtest.Conversation(22))
	other.Messages[1] = irtest.User("A different task: " + strings.Repeat("port the parser ", 20))
	short, stop := context.WithTimeout(tenant, 2*time.Second)
	defer stop()
	_, err := client.Compact(short, other)
	if !quotaRefusal(err, limit.ConcurrentCompacts) {
		t.Errorf("a second Compact while the first one's summarization runs on: %v, want RESOURCE_EXHAUSTED naming %s", err, limit.ConcurrentCompacts)
	}
	release()
	if !eventually(func() bool {
		_, err := client.Compact(tenant, other)
		return err == nil
	}) {
		t.Error("the lease was not given back after the summarization ended")
	}
}

var _ service.Admitter = (*countingAdmitter)(nil)

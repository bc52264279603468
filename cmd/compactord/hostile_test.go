package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/internal/bytesize"
	"github.com/compactord/compactord/internal/hostile"
	"github.com/compactord/compactord/internal/rawh2"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding/gzip"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"gopkg.in/yaml.v3"
)

// podSpec is what the shipped Deployment (k8s/base/deployment.yaml) gives compactord: its
// memory limit and its Go runtime settings.
type podSpec struct {
	limitBytes int64
	env        []string // GOGC, GOMEMLIMIT
	args       []string
}

// shippedPod reads k8s/base/deployment.yaml.
func shippedPod(t *testing.T) podSpec {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "k8s", "base", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name string   `yaml:"name"`
						Args []string `yaml:"args"`
						Env  []struct {
							Name  string `yaml:"name"`
							Value string `yaml:"value"`
						} `yaml:"env"`
						Resources struct {
							Limits map[string]string `yaml:"limits"`
						} `yaml:"resources"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "compactord" {
			continue
		}
		var p podSpec
		for _, e := range c.Env {
			if e.Name == "GOGC" || e.Name == "GOMEMLIMIT" {
				p.env = append(p.env, e.Name+"="+e.Value)
			}
		}
		p.limitBytes = quantity(t, c.Resources.Limits["memory"])
		p.args = c.Args
		return p
	}
	t.Fatal("no compactord container in k8s/base/deployment.yaml")
	return podSpec{}
}

// quantity parses a Kubernetes memory quantity with a binary suffix ("512Mi").
func quantity(t *testing.T, q string) int64 {
	t.Helper()
	for suffix, mult := range map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30} {
		if n, ok := strings.CutSuffix(q, suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err == nil {
				return v * mult
			}
		}
	}
	t.Fatalf("memory limit %q is not a binary quantity", q)
	return 0
}

// TestShippedMemoryAgrees: the Deployment's Go memory limit sits under its container
// limit, and the memory budget compactord derives from it, with the stores at their bounds
// and 100 MiB for the process itself (its tables, the calls' work; about 70 MiB at start),
// fits under that limit.
func TestShippedMemoryAgrees(t *testing.T) {
	pod := shippedPod(t)
	var goMemLimit bytesize.Size
	for _, e := range pod.env {
		if v, ok := strings.CutPrefix(e, "GOMEMLIMIT="); ok {
			if err := goMemLimit.Set(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if goMemLimit == 0 || int64(goMemLimit) >= pod.limitBytes {
		t.Fatalf("GOMEMLIMIT %d, container limit %d: want a Go memory limit under the container's", goMemLimit, pod.limitBytes)
	}
	c, err := parseConfig(pod.args, func(string) string { return "" }, io.Discard)
	if err != nil && !strings.Contains(err.Error(), "--config") {
		t.Fatal(err)
	}
	budget := memoryBudgetFor(int64(c.MemoryBudget), int64(goMemLimit))
	const process = 100 << 20
	stores := int64(c.CacheMaxBytes) + int64(c.TokenMemoBytes) + int64(c.SourceMaxBytes)
	if need := budget + stores + process; need > int64(goMemLimit) {
		t.Errorf("memory budget %d MiB + stores %d MiB (summaries %d, token memo %d, sources %d) + %d MiB for the process = %d MiB, over GOMEMLIMIT %d MiB",
			budget>>20, stores>>20, c.CacheMaxBytes>>20, c.TokenMemoBytes>>20, c.SourceMaxBytes>>20, process>>20, need>>20, goMemLimit>>20)
	}
	if budget < int64(c.MaxMessageBytes) {
		t.Errorf("memory budget %d MiB cannot take one request of --max-message-bytes (%d MiB)", budget>>20, c.MaxMessageBytes>>20)
	}
}

// rss returns the peak (VmHWM) and current (VmRSS) resident memory of pid, in bytes.
func rss(t *testing.T, pid int) (peak, now int64) {
	t.Helper()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("no /proc: %v", err)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("compactord is gone: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[2] == "kB" {
			v, _ := strconv.ParseInt(fields[1], 10, 64)
			switch fields[0] {
			case "VmHWM:":
				peak = v << 10
			case "VmRSS:":
				now = v << 10
			}
		}
	}
	return peak, now
}

// rawCodec sends requests that are already encoded ([]byte) as they are, and decodes
// responses with the protobuf runtime.
type rawCodec struct{}

func (rawCodec) Name() string                       { return "proto" }
func (rawCodec) Marshal(v any) ([]byte, error)      { return v.([]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { return proto.Unmarshal(data, v.(proto.Message)) }

// hostileCase is a request an attacker without credentials can send, and the codes its
// refusal may have (SECURITY.md): RESOURCE_EXHAUSTED is a decoding limit or, when many
// arrive at once, the memory budget.
type hostileCase struct {
	name   string
	method string
	wire   []byte
	gzip   bool
	md     []string
	codes  []codes.Code
}

func (c hostileCase) send(ctx context.Context, conn *grpc.ClientConn) error {
	opts := []grpc.CallOption{grpc.ForceCodec(rawCodec{}), grpc.MaxCallSendMsgSize(64 << 20)}
	if c.gzip {
		opts = append(opts, grpc.UseCompressor(gzip.Name))
	}
	if len(c.md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, c.md...)
	}
	var resp compactorv1.PlanResponse
	return conn.Invoke(ctx, c.method, c.wire, &resp, opts...)
}

func hostileCases() []hostileCase {
	exhausted, invalid := []codes.Code{codes.ResourceExhausted}, []codes.Code{codes.InvalidArgument}
	plan, compact, lower := compactorv1.CompactorService_Plan_FullMethodName, compactorv1.CompactorService_Compact_FullMethodName,
		compactorv1.CompactorService_Lower_FullMethodName
	deepParts := hostile.NestedParts(700_000) // 13 MiB: the generated decoder's stack overflows
	dupID := mustMarshal(&compactorv1.PlanRequest{Messages: []*compactorv1.Message{
		{Id: strings.Repeat("i", 1<<20), Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "a"}}}}},
		{Id: strings.Repeat("i", 1<<20), Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "b"}}}}},
	}, Policy: &compactorv1.Policy{ContextWindow: 8000}})
	cases := []hostileCase{
		{name: "parts nested 700,000 deep (Plan)", method: plan, wire: deepParts, codes: exhausted},
		{name: "parts nested 100,000 deep (Compact)", method: compact, wire: hostile.NestedParts(100_000), codes: exhausted},
		{name: "parts nested 100,000 deep (Lower)", method: lower, wire: hostile.NestedParts(100_000), codes: exhausted},
		{name: "Struct nested 500,000 deep in provider_options", method: plan, wire: hostile.NestedStruct(500_000), codes: exhausted},
		{name: "gzip bomb: 8 million empty messages", method: plan, wire: hostile.EmptyMessages(8_000_000), gzip: true, codes: exhausted},
		{name: "a 1 KiB tenant name", method: plan, wire: dupID[:0], md: []string{"x-compactor-tenant", strings.Repeat("t", 1<<10)}, codes: invalid},
		{name: "1 MiB ids, duplicated", method: plan, wire: dupID, codes: invalid},
	}
	for name, b := range hostile.Malformed() {
		cases = append(cases, hostileCase{name: "malformed: " + name, method: plan, wire: b, codes: invalid})
	}
	return cases
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// TestBinaryHostileRequests runs the built compactord as the shipped Deployment does (its
// GOGC and GOMEMLIMIT) and sends it, as a caller without credentials, the requests of issue
// 27, each alone and then sixteen at once: nesting far past the depth limit, a gzip bomb of
// empty messages, malformed protobuf, oversized tenant names and ids, a 1 MiB header, and
// 500 streams that send headers and never a request on one connection. Every refusal must
// be its documented code, the same process must serve on (a Plan from another connection is
// answered within a second while the idle streams stay open), and its peak RSS must stay
// under the Deployment's memory limit.
func TestBinaryHostileRequests(t *testing.T) {
	pod := shippedPod(t)
	p := startBinary(t, pod.env)
	conn := p.dial(t)
	ctx := t.Context()
	cases := hostileCases()
	check := func(c hostileCase, err error) {
		t.Helper()
		code := status.Code(err)
		for _, want := range c.codes {
			if code == want {
				return
			}
		}
		t.Errorf("%s: %v, want one of %v", c.name, err, c.codes)
	}
	for _, c := range cases {
		start := time.Now()
		err := c.send(ctx, conn)
		check(c, err)
		if msg := status.Convert(err).Message(); len(msg) > 2048 {
			t.Errorf("%s: a %d-byte status message", c.name, len(msg))
		}
		peak, _ := rss(t, p.cmd.Process.Pid)
		t.Logf("%-50s %-20v %6.0f ms  peak RSS %4d MiB", c.name, status.Code(err), float64(time.Since(start).Microseconds())/1000, peak>>20)
	}
	for _, c := range cases {
		start := time.Now()
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() { check(c, c.send(ctx, conn)) })
		}
		wg.Wait()
		peak, now := rss(t, p.cmd.Process.Pid)
		t.Logf("16 × %-45s %6.0f ms  peak RSS %4d MiB, now %4d MiB", c.name, float64(time.Since(start).Microseconds())/1000, peak>>20, now>>20)
	}

	// Headers past the 16 KiB bound (a 1 MiB tenant name) are refused by the transport:
	// it resets the stream, or, as here where the headers run on in CONTINUATION frames,
	// closes the connection (HTTP/2 PROTOCOL_ERROR). Other connections are served.
	raw, err := rawh2.Dial(p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// The write itself may fail: the server closes the connection as the frames arrive.
	id, _ := raw.OpenStream(compactorv1.CompactorService_Plan_FullMethodName, [2]string{"x-compactor-tenant", strings.Repeat("t", 1<<20)})
	if !eventually(func() bool { _, reset := raw.Reset(id); return reset || !raw.Open() }) {
		t.Error("a 1 MiB header was not refused")
	}

	// 500 streams that send headers and never a request, on one connection, hold none of
	// the server's slots: a Plan from another connection is answered within a second.
	idle, err := rawh2.Dial(p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	for range 500 {
		if _, err := idle.OpenStream(compactorv1.CompactorService_Plan_FullMethodName); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the server has read them
	plan := &compactorv1.PlanRequest{Messages: []*compactorv1.Message{
		{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "What is 2+2?"}}}}},
	}, Policy: &compactorv1.Policy{ContextWindow: 8000}}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	start := time.Now()
	if _, err := compactorv1.NewCompactorServiceClient(p.dial(t)).Plan(pctx, plan); err != nil {
		t.Errorf("a Plan from another connection while one holds 500 idle streams: %v", err)
	}
	t.Logf("Plan beside 500 idle streams: %v", time.Since(start))
	if !idle.Open() {
		t.Error("the server closed the connection of the idle streams")
	}

	// The same process serves on, within the pod's memory.
	select {
	case <-p.done:
		t.Fatalf("compactord exited: %v", p.err)
	default:
	}
	if resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health after the hostile requests: %v, %v", resp, err)
	}
	if _, err := compactorv1.NewCompactorServiceClient(conn).Plan(ctx, plan); err != nil {
		t.Errorf("a valid Plan after the hostile requests: %v", err)
	}
	peak, now := rss(t, p.cmd.Process.Pid)
	t.Logf("peak RSS %d MiB, now %d MiB; the pod's limit %d MiB (%s)", peak>>20, now>>20, pod.limitBytes>>20, strings.Join(pod.env, " "))
	if peak > pod.limitBytes {
		t.Errorf("peak RSS %d MiB is over the Deployment's memory limit of %d MiB", peak>>20, pod.limitBytes>>20)
	}
	// Caller strings are bounded in the call log too.
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.logs {
		if b, _ := json.Marshal(r); len(b) > 16<<10 {
			t.Errorf("a %d-byte log line: %.200s…", len(b), b)
		}
	}
}

// TestBinaryRefusesBeforeDecoding: with authentication on, a caller without credentials
// gets UNAUTHENTICATED for a request nested 700,000 deep: it is never decoded.
func TestBinaryRefusesBeforeDecoding(t *testing.T) {
	dir := t.TempDir()
	keys, conf := filepath.Join(dir, "keys"), filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(keys, []byte("sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 runner acme\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("auth:\n  mode: api-key\n  api_keys_file: "+keys+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startBinary(t, nil, "--config", conf)
	conn := p.dial(t)
	c := hostileCase{name: "unauthenticated, nested 700,000 deep", method: compactorv1.CompactorService_Plan_FullMethodName,
		wire: hostile.NestedParts(700_000)}
	if err := c.send(t.Context(), conn); status.Code(err) != codes.Unauthenticated {
		t.Errorf("%s: %v, want UNAUTHENTICATED", c.name, err)
	}
	// With the key, it is decoded within bounds and refused as a limit naming the field.
	c.md = []string{"x-api-key", "test"}
	err := c.send(t.Context(), conn)
	st := status.Convert(err)
	var field string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			field = br.GetFieldViolations()[0].GetField()
		}
	}
	if st.Code() != codes.ResourceExhausted || !strings.HasPrefix(field, "messages[0].parts[0].tool_result") {
		t.Errorf("authenticated, nested 700,000 deep: %v (field %q), want RESOURCE_EXHAUSTED naming the field", err, field)
	}
	if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health: %v", err)
	}
}

// eventually waits up to 5 s for cond.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

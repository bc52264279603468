package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

// binaryDir holds the compactord executable, built on first use (fuzz workers, which run
// TestMain too, never build it).
var (
	binaryDir  string
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "compactord-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binaryDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// binary returns the compactord executable built from this package, building it once.
func binary(t testing.TB) string {
	t.Helper()
	binaryOnce.Do(func() {
		binaryPath = filepath.Join(binaryDir, "compactord")
		if out, err := exec.Command("go", "build", "-o", binaryPath, ".").CombinedOutput(); err != nil {
			binaryErr = fmt.Errorf("building compactord: %v\n%s", err, out)
		}
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

// proc is a running compactord.
type proc struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{} // closed when the process has exited
	err  error         // exit error, valid after done

	mu   sync.Mutex
	logs []map[string]any
}

// startBinary runs compactord on a free loopback port and waits until it serves.
func startBinary(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	args = append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", ""}, args...)
	p := &proc{cmd: exec.Command(binary(t), args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = io.Discard
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				t.Logf("compactord: %s", sc.Text())
				continue
			}
			p.mu.Lock()
			p.logs = append(p.logs, rec)
			p.mu.Unlock()
			if rec["msg"] == "serving" {
				ready <- rec["addr"].(string)
			}
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	select {
	case p.addr = <-ready:
	case <-p.done:
		t.Fatalf("compactord exited before serving: %v", p.err)
	case <-time.After(30 * time.Second):
		t.Fatal("compactord did not start serving")
	}
	return p
}

// dial connects to p over TCP.
func (p *proc) dial(t *testing.T) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// wait waits for p to exit and returns its exit error.
func (p *proc) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(60 * time.Second):
		t.Fatal("compactord did not exit")
		return nil
	}
}

// logged returns the log records with the given msg.
func (p *proc) logged(msg string) []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []map[string]any
	for _, r := range p.logs {
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

func TestBinaryServesHealthReflectionAndValidation(t *testing.T) {
	p := startBinary(t, nil)
	conn := p.dial(t)
	ctx := t.Context()

	for _, svc := range []string{"", "compactor.v1.CompactorService"} {
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health(%q) = %v, %v; want SERVING", svc, resp, err)
		}
	}

	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	refl, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("reflection stream did not end: %v", err)
	}
	var names []string
	for _, s := range refl.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !slices.Contains(names, "compactor.v1.CompactorService") {
		t.Errorf("reflection lists %v, want compactor.v1.CompactorService among them", names)
	}

	_, err = compactorv1.NewCompactorServiceClient(conn).Plan(ctx, &compactorv1.PlanRequest{
		Messages: []*compactorv1.Message{
			{Role: compactorv1.Role_ROLE_USER, Parts: []*compactorv1.Part{{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: "secret user text"}}}}},
			{Role: compactorv1.Role_ROLE_ASSISTANT},
		},
		Policy: &compactorv1.Policy{ContextWindow: 8000},
	})
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("Plan(invalid) = %v, want INVALID_ARGUMENT", err)
	}
	var fields []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	if !slices.Equal(fields, []string{"messages[1].parts"}) {
		t.Errorf("BadRequest fields = %v, want [messages[1].parts]", fields)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if len(p.logged("stopped")) != 1 {
		t.Error(`no "stopped" log line after SIGTERM`)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.logs {
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), "secret user text") {
			t.Errorf("conversation text in the log: %s", b)
		}
	}
}

func TestBinaryRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"bad flag value", nil, []string{"--drain-timeout", "soon"}, "drain-timeout"},
		{"bad env twin", []string{"COMPACTORD_MAX_MESSAGE_BYTES=lots"}, nil, "COMPACTORD_MAX_MESSAGE_BYTES"},
		{"bad log format", nil, []string{"--log-format", "xml"}, "--log-format"},
		{"bad exporter", []string{"OTEL_TRACES_EXPORTER=zipkin"}, nil, "OTEL_TRACES_EXPORTER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binary(t), append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", ""}, tt.args...)...)
			cmd.Env = append(os.Environ(), tt.env...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("compactord started with a bad configuration; output:\n%s", out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("error output does not name %q:\n%s", tt.want, out)
			}
		})
	}
}

func TestBinaryServesMetrics(t *testing.T) {
	p := startBinary(t, nil, "--metrics-listen", "127.0.0.1:0")
	recs := p.logged("metrics")
	if len(recs) != 1 {
		t.Fatalf("no metrics log line: %v", recs)
	}
	if _, err := healthpb.NewHealthClient(p.dial(t)).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + recs[0]["addr"].(string) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`grpc_server_handled_total{grpc_code="OK",grpc_method="Check",grpc_service="grpc.health.v1.Health",grpc_type="unary"} 1`,
		// The bounded stores and their default bounds (64 MiB each).
		`compactord_store_bytes{store="summary-cache"} 0`,
		`compactord_store_max_bytes{store="summary-cache"} 6.7108864e+07`,
		`compactord_store_entries{store="token-memo"} 0`,
		`compactord_store_max_bytes{store="token-memo"} 6.7108864e+07`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// Package redistest starts real redis-server processes on loopback for tests: single nodes,
// a Cluster created with redis-cli --cluster create, and a Sentinel setup. Every process is
// stopped and its directory removed when the test ends. Tests skip, saying why, where
// redis-server or redis-cli is not installed.
package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/tcpproxy"
)

// Need skips tb unless redis-server and redis-cli are on PATH.
func Need(tb testing.TB) {
	tb.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			tb.Skipf("%s not found: skipping tests against real Redis topologies (apt-get install redis-server; CI installs it)", bin)
		}
	}
}

// Node is one running redis-server (or Sentinel) process.
type Node struct {
	Addr string
	Port int
	cmd  *exec.Cmd
	done chan struct{}
}

// Kill stops the process at once (SIGKILL), as a crash would.
func (n *Node) Kill() {
	_ = n.cmd.Process.Kill()
	<-n.done
}

// Start runs redis-server with conf (redis.conf lines) plus the port, a private directory
// and no persistence, on a free loopback port, and waits until it answers PING. With
// sentinel it runs in Sentinel mode (conf must then monitor a master).
func Start(tb testing.TB, sentinel bool, conf ...string) *Node {
	tb.Helper()
	port := freePort(tb)
	dir := tb.TempDir()
	lines := append([]string{
		"port " + strconv.Itoa(port),
		"bind 127.0.0.1",
		"dir " + dir,
		"save \"\"",
		"appendonly no",
		"protected-mode no",
	}, conf...)
	path := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	args := []string{path}
	if sentinel {
		args = append(args, "--sentinel")
	}
	cmd := exec.Command("redis-server", args...)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	n := &Node{Addr: fmt.Sprintf("127.0.0.1:%d", port), Port: port, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(n.done) }()
	tb.Cleanup(n.Kill)
	WaitFor(tb, 10*time.Second, "redis-server on "+n.Addr+" answering PING", func() bool {
		out, err := Cli(n.Port, "PING")
		return err == nil && strings.TrimSpace(out) == "PONG"
	})
	return n
}

// Cli runs redis-cli against the node on port and returns its output.
func Cli(port int, args ...string) (string, error) {
	out, err := exec.Command("redis-cli", append([]string{"-p", strconv.Itoa(port)}, args...)...).CombinedOutput()
	return string(out), err
}

// Cluster starts n masters with cluster mode on, joins them with redis-cli --cluster create
// (no replicas) and waits until the cluster state is ok. It returns the nodes.
func Cluster(tb testing.TB, n int) []*Node {
	tb.Helper()
	nodes := make([]*Node, n)
	addrs := make([]string, n)
	for i := range nodes {
		// The bus port is set too: the default, port + 10000, may be taken or past 65535.
		nodes[i] = Start(tb, false, "cluster-enabled yes", "cluster-config-file nodes.conf", "cluster-node-timeout 2000",
			"cluster-port "+strconv.Itoa(freePort(tb)))
		addrs[i] = nodes[i].Addr
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	WaitFor(tb, 20*time.Second, "cluster_state:ok on every node", func() bool {
		for _, nd := range nodes {
			out, err := Cli(nd.Port, "CLUSTER", "INFO")
			if err != nil || !strings.Contains(out, "cluster_state:ok") {
				return false
			}
		}
		return true
	})
	return nodes
}

// Sentinels starts a master, a replica of it and three Sentinels monitoring the master as
// name (quorum 2, down after 1 s, failover timeout 5 s).
func Sentinels(tb testing.TB, name string) (master, replica *Node, sentinels []*Node) {
	tb.Helper()
	master = Start(tb, false)
	replica = Start(tb, false, fmt.Sprintf("replicaof 127.0.0.1 %d", master.Port))
	WaitFor(tb, 10*time.Second, "the replica in sync", func() bool {
		out, err := Cli(replica.Port, "INFO", "replication")
		return err == nil && strings.Contains(out, "master_link_status:up")
	})
	for range 3 {
		sentinels = append(sentinels, Start(tb, true,
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2", name, master.Port),
			fmt.Sprintf("sentinel down-after-milliseconds %s 1000", name),
			fmt.Sprintf("sentinel failover-timeout %s 5000", name),
			fmt.Sprintf("sentinel parallel-syncs %s 1", name)))
	}
	return master, replica, sentinels
}

// ID returns the node's cluster id.
func (n *Node) ID(tb testing.TB) string {
	tb.Helper()
	out, err := Cli(n.Port, "CLUSTER", "MYID")
	if err != nil {
		tb.Fatalf("CLUSTER MYID on %s: %v %s", n.Addr, err, out)
	}
	return strings.TrimSpace(out)
}

// MoveSlot moves a cluster slot, with its keys, from node from to node to, and tells every
// node of nodes the slot's new owner.
func MoveSlot(tb testing.TB, slot int, from, to *Node, nodes []*Node) {
	tb.Helper()
	s := strconv.Itoa(slot)
	run := func(n *Node, args ...string) string {
		tb.Helper()
		out, err := Cli(n.Port, args...)
		if err != nil || strings.HasPrefix(out, "ERR") || strings.Contains(out, "(error)") {
			tb.Fatalf("redis-cli -p %d %v: %v %s", n.Port, args, err, out)
		}
		return out
	}
	fromID, toID := from.ID(tb), to.ID(tb)
	run(to, "CLUSTER", "SETSLOT", s, "IMPORTING", fromID)
	run(from, "CLUSTER", "SETSLOT", s, "MIGRATING", toID)
	for {
		keys := strings.Fields(run(from, "CLUSTER", "GETKEYSINSLOT", s, "100"))
		if len(keys) == 0 {
			break
		}
		run(from, append([]string{"MIGRATE", "127.0.0.1", strconv.Itoa(to.Port), "", "0", "5000", "KEYS"}, keys...)...)
	}
	for _, n := range nodes {
		run(n, "CLUSTER", "SETSLOT", s, "NODE", toID)
	}
}

// Owner returns the node of nodes that serves slot.
func Owner(tb testing.TB, slot int, nodes []*Node) *Node {
	tb.Helper()
	for _, n := range nodes {
		// CLUSTER NODES marks the answering node "myself"; its slot ranges follow.
		nodesOut, err := Cli(n.Port, "CLUSTER", "NODES")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(nodesOut, "\n") {
			f := strings.Fields(line)
			if len(f) < 9 || !strings.Contains(f[2], "myself") {
				continue
			}
			for _, r := range f[8:] {
				lo, hi, ok := strings.Cut(r, "-")
				if !ok {
					hi = lo
				}
				a, err1 := strconv.Atoi(lo)
				b, err2 := strconv.Atoi(hi)
				if err1 == nil && err2 == nil && a <= slot && slot <= b {
					return n
				}
			}
		}
	}
	tb.Fatalf("no node serves slot %d", slot)
	return nil
}

// WaitFor polls cond every 50 ms until it holds, failing tb after timeout.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Proxied starts a node (Need first) behind a tcpproxy.Proxy, so that a test can stall or
// delay what the node answers; both end with the test.
func Proxied(tb testing.TB) (*Node, *tcpproxy.Proxy) {
	tb.Helper()
	Need(tb)
	node := Start(tb, false)
	proxy, err := tcpproxy.New(node.Addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(proxy.Stop)
	return node, proxy
}

// Ever checks cond over and over in the background until the test ends, and reports
// whether it held at least once: to know a write reached Redis even when it is undone a
// moment later.
func Ever(tb testing.TB, cond func() bool) (held func() bool) {
	var seen atomic.Bool
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if cond() {
				seen.Store(true)
			}
		}
	}()
	tb.Cleanup(func() { close(stop); <-done })
	return seen.Load
}

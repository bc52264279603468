package service_test

import (
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// redisURL returns REDIS_URL or skips the test loudly.
func redisURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("REDIS_URL")
	if u == "" {
		t.Skip("REDIS_URL not set: SKIPPING Redis-backed Compact tests — run .ci/run or export REDIS_URL=redis://127.0.0.1:6379/0")
	}
	return u
}

// tcpProxy forwards a loopback port to a target address and can be cut and restored, to
// take a real Redis away from the servers under test and give it back.
type tcpProxy struct {
	t      *testing.T
	target string
	addr   string
	mu     sync.Mutex
	lis    net.Listener
	conns  map[net.Conn]struct{}
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{t: t, target: target, conns: map[net.Conn]struct{}{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = lis.Addr().String()
	p.serve(lis)
	t.Cleanup(p.stop)
	return p
}

func (p *tcpProxy) serve(lis net.Listener) {
	p.mu.Lock()
	p.lis = lis
	p.mu.Unlock()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = struct{}{}, struct{}{}
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

// stop closes the listener and every forwarded connection: Redis is gone.
func (p *tcpProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lis != nil {
		p.lis.Close()
		p.lis = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// start listens again on the same port: Redis is back.
func (p *tcpProxy) start() {
	var (
		lis net.Listener
		err error
	)
	for range 50 { // the port was ours a moment ago; retry briefly if the OS holds it
		if lis, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("proxy restart: %v", err)
	}
	p.serve(lis)
}

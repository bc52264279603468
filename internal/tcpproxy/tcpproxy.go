// Package tcpproxy forwards a loopback port to a target address, for tests and the load
// test's chaos scenarios that take a real Redis away: Stop refuses (the listener and every
// connection closed, as a dead server), Stall keeps every connection open and forwards
// nothing (a network partition: no refusal, no reset), DelayReplies holds what the target
// sends back for a while (a slow network or server: requests arrive and are applied, their
// replies come late).
package tcpproxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards connections to its Addr on to the target.
type Proxy struct {
	target  string
	addr    string
	stalled atomic.Bool
	delay   atomic.Int64 // of replies, in nanoseconds

	mu    sync.Mutex
	lis   net.Listener
	conns map[net.Conn]struct{}
}

// New listens on a free loopback port and forwards to target.
func New(target string) (*Proxy, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, addr: lis.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(lis)
	return p, nil
}

// Addr is the proxy's address (host:port), the same across Stop and Start.
func (p *Proxy) Addr() string { return p.addr }

// Stall stops (true) or resumes (false) forwarding, keeping every connection open.
func (p *Proxy) Stall(on bool) { p.stalled.Store(on) }

// DelayReplies holds every byte the target sends for d before forwarding it (0: none).
func (p *Proxy) DelayReplies(d time.Duration) { p.delay.Store(int64(d)) }

// Stop closes the listener and every forwarded connection: the target is gone.
func (p *Proxy) Stop() {
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

// Start listens again on the same port after Stop: the target is back.
func (p *Proxy) Start() error {
	var (
		lis net.Listener
		err error
	)
	for range 50 { // the port was ours a moment ago; retry briefly if the OS holds it
		if lis, err = net.Listen("tcp", p.addr); err == nil {
			p.serve(lis)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

func (p *Proxy) serve(lis net.Listener) {
	p.mu.Lock()
	p.lis = lis
	p.mu.Unlock()
	go func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			out, err := net.DialTimeout("tcp", p.target, time.Second)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns[in], p.conns[out] = struct{}{}, struct{}{}
			p.mu.Unlock()
			go p.pipe(out, in, false)
			go p.pipe(in, out, true)
		}
	}()
}

// pipe copies src to dst, holding the bytes while stalled (and, for the target's replies,
// for the reply delay); either side ending closes both.
func (p *Proxy) pipe(dst, src net.Conn, replies bool) {
	defer func() {
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		read := time.Now()
		for p.stalled.Load() {
			time.Sleep(time.Millisecond)
		}
		if d := time.Duration(p.delay.Load()); replies && d > 0 {
			time.Sleep(time.Until(read.Add(d)))
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

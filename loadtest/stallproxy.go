package main

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// stallProxy forwards TCP from a loopback port to an upstream (Redis). Stalled, it keeps
// every connection open and stops forwarding, as a network partition does: no refusal, no
// reset. The upstream may go away and come back on the same address.
type stallProxy struct {
	lis      net.Listener
	upstream string
	stalled  atomic.Bool
	mu       sync.Mutex
	conns    map[net.Conn]bool
}

func newStallProxy(upstream string) (*stallProxy, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &stallProxy{lis: lis, upstream: upstream, conns: map[net.Conn]bool{}}
	go p.accept()
	return p, nil
}

func (p *stallProxy) addr() string { return p.lis.Addr().String() }

func (p *stallProxy) accept() {
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		out, err := net.DialTimeout("tcp", p.upstream, time.Second)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = true, true
		p.mu.Unlock()
		go p.pipe(out, in)
		go p.pipe(in, out)
	}
}

// pipe copies src to dst, holding the bytes while stalled; either side closing closes both.
func (p *stallProxy) pipe(dst, src net.Conn) {
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
		for p.stalled.Load() {
			time.Sleep(time.Millisecond)
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *stallProxy) close() {
	p.lis.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Package rawh2 speaks HTTP/2 to a gRPC server frame by frame, for tests that must do what no
// gRPC client does: open streams that send headers and never a request, send a request and
// never end its stream, send headers of any size. It uses golang.org/x/net/http2's Framer
// and hpack over a plain TCP connection (no TLS).
package rawh2

import (
	"bytes"
	"encoding/binary"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Conn is one HTTP/2 connection to a gRPC server. Its methods are safe for concurrent use.
type Conn struct {
	c net.Conn

	wmu  sync.Mutex // writes: the framer, the encoder and its buffer
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	next uint32

	mu     sync.Mutex
	resets map[uint32]http2.ErrCode // streams the server reset
	goaway bool
	closed chan struct{}
}

// Dial connects to addr, sends the client preface and settings, and starts reading the
// server's frames (acknowledging its settings and pings).
func Dial(addr string) (*Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c := &Conn{c: nc, next: 1, resets: map[uint32]http2.ErrCode{}, closed: make(chan struct{})}
	c.fr = http2.NewFramer(nc, nc)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	c.enc = hpack.NewEncoder(&c.hbuf)
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		nc.Close()
		return nil, err
	}
	if err := c.fr.WriteSettings(); err != nil {
		nc.Close()
		return nil, err
	}
	go c.read()
	return c, nil
}

// read handles the server's frames until the connection ends.
func (c *Conn) read() {
	defer close(c.closed)
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.wmu.Lock()
				_ = c.fr.WriteSettingsAck()
				c.wmu.Unlock()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.wmu.Lock()
				_ = c.fr.WritePing(true, f.Data)
				c.wmu.Unlock()
			}
		case *http2.RSTStreamFrame:
			c.mu.Lock()
			c.resets[f.StreamID] = f.ErrCode
			c.mu.Unlock()
		case *http2.GoAwayFrame:
			c.mu.Lock()
			c.goaway = true
			c.mu.Unlock()
		}
	}
}

// OpenStream opens a stream calling method (a full gRPC method name) with the headers of a
// gRPC call and extra, and sends nothing more on it. It returns the stream's id.
func (c *Conn) OpenStream(method string, extra ...[2]string) (uint32, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.hbuf.Reset()
	for _, h := range append([][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", "localhost"},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	}, extra...) {
		if err := c.enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]}); err != nil {
			return 0, err
		}
	}
	id := c.next
	c.next += 2
	block := c.hbuf.Bytes()
	const maxFrame = 16 << 10
	first := block[:min(len(block), maxFrame)]
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(block) <= maxFrame}); err != nil {
		return 0, err
	}
	for rest := block[len(first):]; len(rest) > 0; {
		n := min(len(rest), maxFrame)
		if err := c.fr.WriteContinuation(id, n == len(rest), rest[:n]); err != nil {
			return 0, err
		}
		rest = rest[n:]
	}
	return id, nil
}

// SendMessage sends msg on stream id as one gRPC message (uncompressed), ending the stream
// when end is set.
func (c *Conn) SendMessage(id uint32, msg []byte, end bool) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	data := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(data[1:], uint32(len(msg)))
	data = append(data, msg...)
	const maxFrame = 16 << 10
	for len(data) > 0 {
		n := min(len(data), maxFrame)
		if err := c.fr.WriteData(id, end && n == len(data), data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// Reset reports whether the server reset stream id, and with which code.
func (c *Conn) Reset(id uint32) (http2.ErrCode, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	code, ok := c.resets[id]
	return code, ok
}

// Open reports whether the connection is still up (no GOAWAY, not closed).
func (c *Conn) Open() bool {
	select {
	case <-c.closed:
		return false
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.goaway
}

// Close closes the connection.
func (c *Conn) Close() error {
	err := c.c.Close()
	<-c.closed
	return err
}

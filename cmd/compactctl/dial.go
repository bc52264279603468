package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
)

// probe records why connecting to the server failed: the dialer's error (DNS, connection
// refused), the TLS handshake's, or the connection closing before the server said a word (a
// plaintext client at a TLS port). gRPC reports each of them as UNAVAILABLE, which reads as
// transient; they are configuration faults that no retry cures, so compactctl connects
// before its first call and classifies them (connect, classify).
type probe struct {
	mu  sync.Mutex
	err error // the latest failure
}

func (p *probe) record(err error) {
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
}

func (p *probe) last() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// dial is the gRPC dialer: TCP to addr (resolving its host here, so a DNS failure is the
// dialer's), recording failures.
func (p *probe) dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		p.record(err)
		return nil, err
	}
	return &watchedConn{Conn: c, p: p}, nil
}

// silentClose is a connection that ended before the server sent a byte.
type silentClose struct {
	err error
	tls bool // over an established TLS session
}

func (e silentClose) Error() string {
	if e.tls {
		return e.err.Error() // a TLS alert says why
	}
	return "the server closed the connection before answering: " + e.err.Error()
}

func (e silentClose) Unwrap() error { return e.err }

// watchedConn records a connection that fails before its first byte from the server.
type watchedConn struct {
	net.Conn
	p     *probe
	tls   bool
	heard atomic.Bool
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.heard.Store(true)
	} else if err != nil && !c.heard.Load() {
		c.p.record(silentClose{err: err, tls: c.tls})
	}
	return n, err
}

// Write records a write that fails before the server's first byte: a TLS 1.3 server that
// refuses the client's certificate does so after the client's handshake is done, and the
// client may see its first write fail (the connection reset) rather than read the alert.
func (c *watchedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil && !c.heard.Load() {
		c.p.record(silentClose{err: err, tls: c.tls})
	}
	return n, err
}

// handshakeError is a failed TLS handshake.
type handshakeError struct{ err error }

func (e handshakeError) Error() string { return "TLS handshake: " + e.err.Error() }
func (e handshakeError) Unwrap() error { return e.err }

// probedCreds are TLS credentials that record handshake failures and watch the session.
type probedCreds struct {
	credentials.TransportCredentials
	p *probe
}

func (c probedCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if c.Info().SecurityProtocol != "tls" {
		return conn, info, err // plaintext: the dialer's connection is watched already
	}
	if err != nil {
		c.p.record(handshakeError{err})
		return conn, info, err
	}
	return &watchedConn{Conn: conn, p: c.p, tls: true}, info, nil
}

func (c probedCreds) Clone() credentials.TransportCredentials {
	return probedCreds{TransportCredentials: c.TransportCredentials.Clone(), p: c.p}
}

// awaitConnection connects conn and waits until it is ready or has failed once; a failure
// that is a configuration fault comes back as a configError, anything else (a server that is
// starting, a deadline) is left to the call and its retries.
func awaitConnection(ctx context.Context, conn *grpc.ClientConn, p *probe, f *connFlags, addr string) error {
	conn.Connect()
	for {
		switch s := conn.GetState(); s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure:
			if err := classify(p.last(), f, addr); err != nil {
				return err
			}
			return nil
		default:
			if !conn.WaitForStateChange(ctx, s) {
				return nil // the deadline: the call reports it
			}
		}
	}
}

// classify returns the configuration fault err is, with the flag to fix, or nil when err is
// none (or nil).
func classify(err error, f *connFlags, addr string) error {
	if err == nil {
		return nil
	}
	tlsOn := f.usesTLS()
	var (
		dns       *net.DNSError
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		notTLS    tls.RecordHeaderError
		handshake handshakeError
		silent    silentClose
	)
	switch {
	case errors.As(err, &dns):
		return configError{err, fmt.Sprintf("check --addr (or $COMPACTORD_ADDR): %q does not resolve", dns.Name)}
	case errors.Is(err, syscall.ECONNREFUSED):
		return configError{err, "nothing listens at " + addr + ": check --addr (or $COMPACTORD_ADDR), and that compactord runs there"}
	case errors.As(err, &unknownCA):
		return configError{err, "the server's certificate is signed by a CA this client does not trust: give that CA with --tls-ca"}
	case errors.As(err, &hostname):
		return configError{err, "the server's certificate is not for the name dialled: set --tls-server-name to a name it holds"}
	case errors.As(err, &invalid):
		return configError{err, "the server's certificate is not valid (expired, or not for serving): renew it on the server"}
	case errors.As(err, &notTLS):
		return configError{err, "the server does not speak TLS: drop --tls, --tls-ca and --tls-cert, or serve TLS (compactord --tls-cert)"}
	case errors.As(err, &silent) && !silent.tls && !tlsOn:
		return configError{err, "the server hung up before answering, as a TLS server does to plaintext: add --tls (and --tls-ca for a private CA)"}
	case tlsOn && clientCertRefused(err):
		return configError{err, "the server wants a client certificate it accepts (mutual TLS): give --tls-cert and --tls-key"}
	case errors.As(err, &silent) && silent.tls && f.tlsCert == "":
		// A gRPC server speaks first once the handshake is done (its SETTINGS); one that
		// hangs up instead refused the session, and a missing client certificate is why.
		return configError{err, "the server closed the TLS session before answering, as one that requires a client certificate (mutual TLS) does: give --tls-cert and --tls-key"}
	case errors.As(err, &silent) && silent.tls:
		return configError{err, "the server closed the TLS session before answering, as one that refuses the client certificate does: check --tls-cert and --tls-key, and that the server trusts their CA"}
	case errors.As(err, &handshake):
		return configError{err, "the TLS handshake failed: check --tls-ca, --tls-cert, --tls-key and --tls-server-name"}
	}
	return nil
}

// clientCertRefused reports a TLS alert about the client's certificate: missing (TLS 1.3's
// certificate_required, or a handshake failure) or refused (bad, unknown CA, expired).
// crypto/tls reports remote alerts only as text.
func clientCertRefused(err error) bool {
	msg := err.Error()
	for _, alert := range []string{"certificate required", "bad certificate", "unknown certificate authority",
		"certificate expired", "unsupported certificate", "certificate revoked"} {
		if strings.Contains(msg, "remote error: tls: "+alert) {
			return true
		}
	}
	return false
}

// configError is a fault in how compactctl was told to reach the server: the address, TLS
// or certificates. It is never retried; hint names the flag to fix.
type configError struct {
	err  error
	hint string
}

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

// Package tlsfiles serves TLS from PEM files that change under a running process: a
// certificate and key (rotated by cert-manager or any other issuer) and, for mutual TLS, the
// CAs that sign client certificates. Every handshake uses the files' current content; a
// change is picked up on the next handshake after the files' modification time or size
// changes, at most once per PollInterval, without a restart and without touching open
// connections (package internal/filewatch).
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/compactord/compactord/internal/filewatch"
)

// DefaultPollInterval is how often a handshake may look at the files.
const DefaultPollInterval = 5 * time.Second

// Files names the PEM files of a server's TLS.
type Files struct {
	// CertFile and KeyFile hold the server's certificate chain and private key. Required.
	CertFile, KeyFile string
	// ClientCAFile holds the CAs that sign client certificates. When set, every client must
	// present a certificate that chains to one of them (mutual TLS).
	ClientCAFile string
	// PollInterval bounds how often the files are stat'ed; zero means DefaultPollInterval.
	PollInterval time.Duration
	// OnReload, when set, is told of every reload and every failed one (the previous
	// material stays in use after a failure).
	OnReload func(err error)
}

// Server serves a tls.Config backed by Files.
type Server struct {
	f       Files
	current *filewatch.Value[*tls.Config]
}

// New loads the files once and returns a Server; it fails when they cannot be loaded.
func New(f Files) (*Server, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("tlsfiles: a certificate file and a key file are required")
	}
	if f.PollInterval <= 0 {
		f.PollInterval = DefaultPollInterval
	}
	s := &Server{f: f}
	// A rotation writes the files one after the other: a pair that does not match yet fails
	// to load and is tried again at the next poll, with the old material in use meanwhile.
	v, err := filewatch.New([]string{f.CertFile, f.KeyFile, f.ClientCAFile},
		filewatch.Options{Interval: f.PollInterval, OnReload: f.OnReload}, s.load)
	if err != nil {
		return nil, fmt.Errorf("tlsfiles: %w", err)
	}
	s.current = v
	return s, nil
}

// Config returns the tls.Config to serve with: each handshake gets the files' current
// certificate and client CAs.
func (s *Server) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.current.Get(), nil
		},
	}
}

func (s *Server) load() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(s.f.CertFile, s.f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tlsfiles: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if s.f.ClientCAFile != "" {
		pem, err := os.ReadFile(s.f.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tlsfiles: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tlsfiles: %s holds no PEM certificate", s.f.ClientCAFile)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

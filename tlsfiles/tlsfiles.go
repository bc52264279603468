// Package tlsfiles serves TLS from PEM files that change under a running process: a
// certificate and key (rotated by cert-manager or any other issuer) and, for mutual TLS, the
// CAs that sign client certificates. Every handshake uses the files' current content; a
// change is picked up on the next handshake after the files' modification time or size
// changes, at most once per PollInterval, without a restart and without touching open
// connections.
//
// Why not a library: the maintained watchers (controller-runtime's certwatcher) bring
// fsnotify and a Kubernetes dependency tree for what is a stat call per interval; a
// Kubernetes secret update swaps a symlink, which a stat sees as well as an inotify watch.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
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
	f   Files
	now func() time.Time

	mu      sync.Mutex
	checked time.Time // when the files were last stat'ed
	stamp   string    // their modification times and sizes then
	current *tls.Config
}

// New loads the files once and returns a Server; it fails when they cannot be loaded.
func New(f Files) (*Server, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("tlsfiles: a certificate file and a key file are required")
	}
	if f.PollInterval <= 0 {
		f.PollInterval = DefaultPollInterval
	}
	s := &Server{f: f, now: time.Now}
	stamp, err := s.readStamp()
	if err != nil {
		return nil, err
	}
	if s.current, err = s.load(); err != nil {
		return nil, err
	}
	s.stamp, s.checked = stamp, s.now()
	return s, nil
}

// Config returns the tls.Config to serve with: each handshake gets the files' current
// certificate and client CAs.
func (s *Server) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.config(), nil
		},
	}
}

// config returns the current material, reloading it first when the files changed.
func (s *Server) config() *tls.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.now().Sub(s.checked) < s.f.PollInterval {
		return s.current
	}
	s.checked = s.now()
	stamp, err := s.readStamp()
	if err != nil || stamp == s.stamp {
		if err != nil && s.f.OnReload != nil {
			s.f.OnReload(err)
		}
		return s.current
	}
	// A rotation writes the files one after the other: a pair that does not match yet is
	// retried at the next poll, with the old material in use meanwhile.
	cfg, err := s.load()
	if s.f.OnReload != nil {
		s.f.OnReload(err)
	}
	if err == nil {
		s.current, s.stamp = cfg, stamp
	}
	return s.current
}

// Reload re-reads the files now, whatever their stamps say.
func (s *Server) Reload() error {
	cfg, err := s.load()
	if err != nil {
		return err
	}
	stamp, err := s.readStamp()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.current, s.stamp, s.checked = cfg, stamp, s.now()
	s.mu.Unlock()
	return nil
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

// readStamp identifies the files' current versions by modification time and size.
func (s *Server) readStamp() (string, error) {
	var out string
	for _, name := range []string{s.f.CertFile, s.f.KeyFile, s.f.ClientCAFile} {
		if name == "" {
			continue
		}
		st, err := os.Stat(name)
		if err != nil {
			return "", fmt.Errorf("tlsfiles: %w", err)
		}
		out += fmt.Sprintf("%s:%d:%d;", name, st.ModTime().UnixNano(), st.Size())
	}
	return out, nil
}

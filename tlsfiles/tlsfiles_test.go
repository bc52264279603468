package tlsfiles

import (
	"bufio"
	"crypto/tls"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/certtest"
)

// echoServer accepts TLS connections with cfg and echoes lines back.
func echoServer(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return lis.Addr().String()
}

// dial handshakes with addr trusting ca and returns the connection and the server
// certificate's common name.
func dial(t *testing.T, addr string, ca *certtest.CA, client *tls.Certificate) (*tls.Conn, string, error) {
	t.Helper()
	cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
	}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, "", err
	}
	// TLS 1.3 reports a refused client certificate on the first read, not in Dial.
	if err := roundTrip(c); err != nil {
		c.Close()
		return nil, "", err
	}
	return c, c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

func roundTrip(c *tls.Conn) error {
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err == nil && line != "ping\n" {
		err = net.UnknownNetworkError("echo returned " + line)
	}
	return err
}

// TestRotation: new handshakes get the rotated certificate while a connection opened before
// the rotation keeps working; a half-written rotation (cert without its key) keeps the old
// pair in use.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "test CA")
	certFile, keyFile := ca.Issue(t, certtest.Leaf{CommonName: "first"}).Write(t, dir, "server")
	var reloads []error
	s, err := New(Files{CertFile: certFile, KeyFile: keyFile, PollInterval: time.Millisecond,
		OnReload: func(err error) { reloads = append(reloads, err) }})
	if err != nil {
		t.Fatal(err)
	}
	addr := echoServer(t, s.Config())
	old, name, err := dial(t, addr, ca, nil)
	if err != nil || name != "first" {
		t.Fatalf("first handshake: %v, certificate %q", err, name)
	}
	defer old.Close()

	// Half a rotation: the new certificate is written, its key not yet.
	second := ca.Issue(t, certtest.Leaf{CommonName: "second"})
	certtest.WriteFile(t, certFile, second.CertPEM)
	time.Sleep(5 * time.Millisecond)
	if _, name, err := dial(t, addr, ca, nil); err != nil || name != "first" {
		t.Errorf("during a half-written rotation: %v, certificate %q; want the old pair", err, name)
	}
	certtest.WriteFile(t, keyFile, second.KeyPEM)
	time.Sleep(5 * time.Millisecond)
	c, name, err := dial(t, addr, ca, nil)
	if err != nil || name != "second" {
		t.Fatalf("after the rotation: %v, certificate %q", err, name)
	}
	c.Close()
	if err := roundTrip(old); err != nil {
		t.Errorf("the connection opened before the rotation broke: %v", err)
	}
	if len(reloads) < 2 || reloads[0] == nil || reloads[len(reloads)-1] != nil {
		t.Errorf("reloads %v: want a failed one (mismatched pair), then a successful one", reloads)
	}
}

// TestMutualTLS: a client certificate from the client CA is required; replacing the CA file
// refuses the old CA's clients on their next handshake.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "server CA")
	clientCA := certtest.NewCA(t, "client CA")
	certFile, keyFile := ca.Issue(t, certtest.Leaf{CommonName: "server"}).Write(t, dir, "server")
	caFile := filepath.Join(dir, "clients.pem")
	certtest.WriteFile(t, caFile, clientCA.PEM)
	s, err := New(Files{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile, PollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	addr := echoServer(t, s.Config())
	agent := clientCA.Issue(t, certtest.Leaf{CommonName: "agent", Client: true}).TLS(t)
	if c, _, err := dial(t, addr, ca, &agent); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	} else {
		c.Close()
	}
	if _, _, err := dial(t, addr, ca, nil); err == nil {
		t.Error("a client without a certificate was accepted")
	}
	stranger := certtest.NewCA(t, "stranger").Issue(t, certtest.Leaf{CommonName: "x", Client: true}).TLS(t)
	if _, _, err := dial(t, addr, ca, &stranger); err == nil {
		t.Error("a client certificate from another CA was accepted")
	}
	certtest.WriteFile(t, caFile, certtest.NewCA(t, "new client CA").PEM)
	time.Sleep(5 * time.Millisecond)
	if _, _, err := dial(t, addr, ca, &agent); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("after the client CA was replaced: %v, want the old client refused", err)
	}
}

func TestNewFails(t *testing.T) {
	dir := t.TempDir()
	if _, err := New(Files{CertFile: filepath.Join(dir, "none.crt"), KeyFile: filepath.Join(dir, "none.key")}); err == nil {
		t.Error("missing files: no error")
	}
	ca := certtest.NewCA(t, "ca")
	certFile, keyFile := ca.Issue(t, certtest.Leaf{CommonName: "s"}).Write(t, dir, "s")
	bad := filepath.Join(dir, "bad.pem")
	certtest.WriteFile(t, bad, []byte("not pem"))
	if _, err := New(Files{CertFile: certFile, KeyFile: keyFile, ClientCAFile: bad}); err == nil {
		t.Error("a client CA file without PEM: no error")
	}
}

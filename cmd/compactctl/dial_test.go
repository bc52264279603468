package main

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// TestClassifyClosedTLSSession covers what a real handshake shows only now and then: a TLS
// 1.3 server refuses the client's certificate after the client's handshake is done, and the
// client may see its write fail or its read reset instead of the server's alert.
func TestClassifyClosedTLSSession(t *testing.T) {
	reset := silentClose{err: syscall.ECONNRESET, tls: true}
	pipe := silentClose{err: syscall.EPIPE, tls: true}
	for _, tc := range []struct {
		name  string
		err   error
		flags connFlags
		hint  string // "" when the failure is not a configuration fault
	}{
		{"no client certificate, write fails", pipe, connFlags{tlsCA: "ca.pem"}, "give --tls-cert and --tls-key"},
		{"no client certificate, read reset", reset, connFlags{tlsCA: "ca.pem"}, "give --tls-cert and --tls-key"},
		{"a client certificate, reset", reset, connFlags{tlsCert: "c.pem", tlsKey: "k.pem"}, "check --tls-cert and --tls-key"},
		{"the alert read", errors.New("remote error: tls: certificate required"), connFlags{tls: true}, "give --tls-cert and --tls-key"},
		{"plaintext hung up", silentClose{err: syscall.ECONNRESET}, connFlags{}, "add --tls"},
		{"a timeout", errors.New("i/o timeout"), connFlags{tls: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.err, &tc.flags, "127.0.0.1:1")
			var ce configError
			switch {
			case tc.hint == "" && got != nil:
				t.Fatalf("classify = %v, want none", got)
			case tc.hint == "":
			case !errors.As(got, &ce):
				t.Fatalf("classify = %v, want a configuration fault", got)
			case !strings.Contains(ce.hint, tc.hint):
				t.Errorf("hint %q, want it to say %q", ce.hint, tc.hint)
			}
		})
	}
}

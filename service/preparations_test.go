package service

import (
	"context"
	"strings"
	"testing"
)

// TestPreparationsBounds: a tenant has at most MaxTenantPreparations in flight and the server
// at most its bound; a place given back is taken again; after Shutdown none is given.
func TestPreparationsBounds(t *testing.T) {
	s := &Server{}
	p := &s.preps
	p.stop, p.cancel = context.WithCancel(context.Background())
	var releases []func()
	for range MaxTenantPreparations {
		r, why := p.admit("a", MaxTenantPreparations+1)
		if why != "" {
			t.Fatalf("refused under the bounds: %s", why)
		}
		releases = append(releases, r)
	}
	if _, why := p.admit("a", MaxTenantPreparations+1); !strings.Contains(why, "the tenant has") {
		t.Errorf("a tenant's preparation beyond its bound: %q", why)
	}
	rb, why := p.admit("b", MaxTenantPreparations+1)
	if why != "" {
		t.Fatalf("another tenant refused: %s", why)
	}
	if _, why := p.admit("c", MaxTenantPreparations+1); !strings.Contains(why, "the server has") {
		t.Errorf("a preparation beyond the server's bound: %q", why)
	}
	releases[0]()
	releases[0]() // once only
	if r, why := p.admit("a", MaxTenantPreparations+1); why != "" {
		t.Errorf("a place given back is not taken again: %q", why)
	} else {
		r()
	}
	for _, r := range append(releases[1:], rb) {
		r()
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, why := s.preps.admit("a", 10); !strings.Contains(why, "shutting down") {
		t.Errorf("a preparation after Shutdown: %q", why)
	}
}

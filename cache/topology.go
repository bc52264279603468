package cache

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
)

// Topology says how to reach the Redis that caches summaries, beyond a single node's URL:
// a Sentinel-managed master, or a Cluster. It is turned into go-redis's universal options,
// with the same short timeouts NewRedis gives a URL, so a dead or stalled Redis degrades
// Compact quickly instead of stalling it.
type Topology struct {
	// Mode is "sentinel" or "cluster".
	Mode string
	// Addrs are the Sentinel addresses (sentinel) or the seed nodes (cluster), host:port.
	Addrs []string
	// MasterName is the name Sentinel monitors the master under (sentinel only).
	MasterName string
	// Username and Password authenticate to the Redis nodes (ACL user, or only a password).
	Username, Password string
	// Credentials, when set, gives the user and password for each new connection in their
	// place, so that a rotated password is used without a restart (connections already
	// open stay authenticated).
	Credentials func() (username, password string)
	// SentinelUsername and SentinelPassword authenticate to the Sentinels, when they require it.
	SentinelUsername, SentinelPassword string
	// TLS, when set, connects to every node (and Sentinel) over TLS with this configuration.
	TLS *tls.Config
}

// Topology modes.
const (
	ModeSentinel = "sentinel"
	ModeCluster  = "cluster"
)

// Client returns a go-redis client for t; it connects lazily (no network I/O here).
func (t Topology) Client() (redis.UniversalClient, error) {
	if len(t.Addrs) == 0 {
		return nil, errors.New("cache: redis topology: no addresses")
	}
	o := &redis.UniversalOptions{
		Addrs:            t.Addrs,
		Username:         t.Username,
		Password:         t.Password,
		SentinelUsername: t.SentinelUsername,
		SentinelPassword: t.SentinelPassword,
		TLSConfig:        t.TLS,
		DialTimeout:      2 * time.Second,
		ReadTimeout:      time.Second,
		WriteTimeout:     time.Second,
		// See NewRedis: a dead node should cost one quick retry, not half a second per command.
		DialerRetries:      2,
		DialerRetryTimeout: 50 * time.Millisecond,
		// The cache's per-command budget is a context deadline (RedisOptions.Budget).
		ContextTimeoutEnabled: true,
		CredentialsProvider:   t.Credentials,
	}
	switch t.Mode {
	case ModeSentinel:
		if t.MasterName == "" {
			return nil, errors.New("cache: redis topology: sentinel needs the master name")
		}
		o.MasterName = t.MasterName
		return redis.NewFailoverClient(o.Failover()), nil
	case ModeCluster:
		return redis.NewClusterClient(o.Cluster()), nil
	}
	return nil, fmt.Errorf("cache: redis topology: mode %q is not sentinel or cluster", t.Mode)
}

// TLSConfig returns a TLS configuration that trusts the PEM certificates in caFile (the
// system roots when caFile is empty) and checks the server name serverName (the dialed host
// when empty).
func TLSConfig(caFile, serverName string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile == "" {
		return c, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("cache: redis tls ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("cache: redis tls ca: no certificate in %s", caFile)
	}
	c.RootCAs = pool
	return c, nil
}

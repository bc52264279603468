package auth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/compactord/compactord/internal/filewatch"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// APIKey is one entry of the API keys file.
type APIKey struct {
	// Hash is the SHA-256 of the key; the file never holds keys themselves.
	Hash [sha256.Size]byte
	// Name identifies the key in logs and in the gateways list ("api-key:" + Name).
	Name    string
	Tenant  string
	Gateway bool
}

// ParseAPIKeys reads an API keys file: one key per line,
//
//	sha256:<64 hex digits> <name> <tenant> [gateway]
//
// where the hash is that of the key (printf %s "$KEY" | sha256sum); blank lines and lines
// starting with # are ignored. A gateway key may act for any tenant; its tenant may be "-".
func ParseAPIKeys(b []byte) ([]APIKey, error) {
	var keys []APIKey
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 || len(f) > 4 || (len(f) == 4 && f[3] != "gateway") {
			return nil, fmt.Errorf("line %d: want \"sha256:<hex> <name> <tenant> [gateway]\"", n)
		}
		h, ok := strings.CutPrefix(f[0], "sha256:")
		raw, err := hex.DecodeString(h)
		if !ok || err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("line %d: the key must be given as sha256:<64 hex digits>, its hash", n)
		}
		k := APIKey{Name: f[1], Tenant: f[2], Gateway: len(f) == 4}
		copy(k.Hash[:], raw)
		if k.Tenant == "-" {
			if !k.Gateway {
				return nil, fmt.Errorf("line %d: only a gateway key may have no tenant (-)", n)
			}
			k.Tenant = ""
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("no keys")
	}
	return keys, sc.Err()
}

// apiKeys authenticates the x-api-key header against the keys file.
type apiKeys struct{ file *filewatch.Value[[]APIKey] }

func newAPIKeys(path string, now func() time.Time) (apiKeys, error) {
	if path == "" {
		return apiKeys{}, errors.New("auth: api-key mode needs api_keys_file")
	}
	w, err := watchFile(path, now, ParseAPIKeys)
	if err != nil {
		return apiKeys{}, fmt.Errorf("auth: api keys: %w", err)
	}
	return apiKeys{w}, nil
}

func (a apiKeys) Authenticate(ctx context.Context) (Identity, error) {
	key := header(ctx, APIKeyKey)
	if key == "" {
		return Identity{}, errNoCredentials(APIKeyKey + " is missing")
	}
	sum := sha256.Sum256([]byte(key))
	// Every entry is compared, in constant time, so timing tells nothing about which
	// prefix of which hash matched.
	var found *APIKey
	keys := a.file.Get()
	for i := range keys {
		if subtle.ConstantTimeCompare(sum[:], keys[i].Hash[:]) == 1 {
			found = &keys[i]
		}
	}
	if found == nil {
		return Identity{}, status.Error(codes.Unauthenticated, "invalid credentials: unknown API key")
	}
	return Identity{Method: ModeAPIKey, Subject: "api-key:" + found.Name, Tenant: found.Tenant, Gateway: found.Gateway}, nil
}

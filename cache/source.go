package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Sources keeps compactions' sources: the conversation a Compact received, as opaque bytes
// the service encodes, under the tenant and the prefix hash of all its messages, for a TTL,
// within a byte budget per tenant. A source is stored and returned whole or not at all.
// Implementations are safe for concurrent use.
type Sources interface {
	// PutSource stores b under ref for the store's TTL. A source already stored under ref
	// (the same messages: ref hashes them) has its TTL renewed and costs nothing more. A
	// source that would take the tenant past its budget is refused with a *BudgetError
	// (wrapping ErrBudget); a backend failure is an error wrapping ErrUnavailable.
	PutSource(ctx context.Context, ref SourceRef, b []byte) error
	// GetSource returns the source stored under ref, or an error wrapping ErrNotFound (never
	// stored, expired, evicted, or another tenant's), or one wrapping ErrUnavailable.
	GetSource(ctx context.Context, ref SourceRef) ([]byte, error)
}

// ErrBudget means a tenant's sources would exceed its byte budget.
var ErrBudget = errors.New("cache: source budget exhausted")

// BudgetError is a source refused for the tenant's byte budget: the budget, the bytes the
// tenant's live sources hold, and the size of the refused one.
type BudgetError struct{ Budget, Used, Size int64 }

func (e *BudgetError) Error() string {
	return fmt.Sprintf("source budget: a source of %d bytes does not fit the tenant's %d bytes of sources (%d held until their TTL ends)",
		e.Size, e.Budget, e.Used)
}

// Unwrap makes a BudgetError match ErrBudget.
func (e *BudgetError) Unwrap() error { return ErrBudget }

// DefaultSourceTTL is how long a source is kept unless configured otherwise.
const DefaultSourceTTL = 7 * 24 * time.Hour

// DefaultSourceBudget is the bytes of sources a tenant may hold unless configured otherwise.
const DefaultSourceBudget = 256 << 20

// SourceRef names one source: its tenant's hash and the prefix hash of its messages. The
// zero SourceRef is invalid.
type SourceRef struct {
	tenant string // hex of sha256(tenant)[:8]
	hash   string // hex of the prefix hash
}

// NewSourceRef is the reference of the source with prefix hash h of tenant.
func NewSourceRef(tenant string, h [32]byte) SourceRef {
	t := sha256.Sum256([]byte(tenant))
	return SourceRef{tenant: hex.EncodeToString(t[:8]), hash: hex.EncodeToString(h[:])}
}

// Package uninit allocates byte buffers without clearing them first, for the hot paths that
// overwrite every byte they keep (a request's copy, a lowered body): clearing tens of KiB per
// call is measurable.
package uninit

import (
	"strings"
	"unsafe"
)

// Bytes returns an empty slice with room for at least n bytes, whose backing array may hold
// anything: the caller must write a byte before reading it, which appending guarantees.
func Bytes(n int) []byte {
	var sb strings.Builder
	sb.Grow(n)      // the runtime's allocation without zeroing
	sb.WriteByte(0) // makes the buffer reachable through String
	return unsafe.Slice(unsafe.StringData(sb.String()), sb.Cap())[:0]
}

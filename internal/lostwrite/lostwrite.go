// Package lostwrite undoes a Redis write whose reply never came back in time. A command that
// times out may still have been applied: a lock taken with SET NX or a lease added to a
// sorted set would then stay, unknown to anyone, until its expiry (minutes), and every other
// caller would wait for it. The writer knows the token it wrote, so it can take exactly that
// write back with a compare-and-delete, whenever the reply is lost.
package lostwrite

import (
	"context"
	"time"
)

// Timing of the undo: each attempt may take Timeout (far above the per-command budget the
// write missed); a second attempt follows Retry later unless the first removed the write,
// for a write still on its way when the first one ran.
const (
	Timeout = 2 * time.Second
	Retry   = time.Second
)

// Undo runs undo in the background, detached from any caller: once now, and once more
// after Retry unless undo reports it removed the write. Errors are dropped: what is left
// expires by itself.
func Undo(undo func(ctx context.Context) (removed bool, err error)) {
	go func() {
		for attempt := range 2 {
			if attempt > 0 {
				time.Sleep(Retry)
			}
			ctx, cancel := context.WithTimeout(context.Background(), Timeout)
			removed, err := undo(ctx)
			cancel()
			if err == nil && removed {
				return
			}
		}
	}()
}

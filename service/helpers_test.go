package service_test

import (
	"context"
	"time"

	"github.com/compactord/compactord/engine"
)

func engineLimits(maxMessages int) engine.Limits {
	l := engine.DefaultLimits()
	l.MaxMessages = maxMessages
	return l
}

func contextWithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

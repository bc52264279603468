package cache

import (
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

const instrumentationName = "github.com/compactord/compactord/cache"

// Span attribute keys. Spans never carry keys, tenants or summary text.
const (
	// AttrHit is set on lookups: whether an entry was found.
	AttrHit = attribute.Key("compactor.cache.hit")
	// AttrBackend names the backend: "memory" or "redis".
	AttrBackend = attribute.Key("compactor.cache.backend")
	// AttrKeys is the number of keys a Longest lookup asked for.
	AttrKeys = attribute.Key("compactor.cache.keys")
	// AttrHitIndex is the index Longest found (-1 for none).
	AttrHitIndex = attribute.Key("compactor.cache.hit_index")
	// AttrAcquired is set on lock spans: whether the lock was taken.
	AttrAcquired = attribute.Key("compactor.cache.lock.acquired")
)

type tracer struct {
	t     trace.Tracer
	attrs []attribute.KeyValue
}

func newTracer(tp trace.TracerProvider, attrs ...attribute.KeyValue) tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tracer{t: tp.Tracer(instrumentationName), attrs: attrs}
}

// end records err on span unless it is an expected outcome (not found, locked), then ends it.
func end(span trace.Span, err error) {
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrLocked) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

package main

import (
	"context"
	"fmt"
	"io"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// setupTracing builds the tracer provider the standard OTEL_* variables ask for:
// OTEL_TRACES_EXPORTER = otlp | console | none, OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT,
// OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL = http/protobuf (default) | grpc, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER. With neither an exporter nor an endpoint
// set, no exporter runs. The returned shutdown flushes pending spans.
func setupTracing(ctx context.Context, getenv func(string) string, console io.Writer, version string) (trace.TracerProvider, func(context.Context) error, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	noShutdown := func(context.Context) error { return nil }
	kind := getenv("OTEL_TRACES_EXPORTER")
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") + getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	if kind == "" {
		if endpoint == "" {
			return noop.NewTracerProvider(), noShutdown, nil
		}
		kind = "otlp"
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch kind {
	case "none":
		return noop.NewTracerProvider(), noShutdown, nil
	case "console":
		exp, err = stdouttrace.New(stdouttrace.WithWriter(console))
	case "otlp":
		proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		if proto == "" {
			proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		switch proto {
		case "", "http/protobuf":
			exp, err = otlptracehttp.New(ctx)
		case "grpc":
			exp, err = otlptracegrpc.New(ctx)
		default:
			return nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not supported (grpc or http/protobuf)", proto)
		}
	default:
		return nil, nil, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported (otlp, console or none)", kind)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("trace exporter %s: %w", kind, err)
	}
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName("compactord"), semconv.ServiceVersion(version)),
		resource.Environment(),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp, tp.Shutdown, nil
}

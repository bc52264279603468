package summarize

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/compactord/compactord/summary"
	"go.opentelemetry.io/otel/attribute"
)

// Price is what one model costs, per million tokens, in the currency the operator chooses
// (the same for every row of a table). compactord ships no prices: the table is the
// operator's (docs/summarizer-prices.example.yaml is an example, not a quote).
type Price struct {
	// Model is the model name as the provider reports it in its answer, or as the summarizer
	// config names it; a trailing "*" matches every model name with that prefix
	// ("claude-sonnet-4-5*").
	Model string `yaml:"model"`
	// Input is the price of input tokens neither read from nor written to the prompt cache.
	Input float64 `yaml:"input"`
	// CacheRead is the price of input tokens read from the prompt cache.
	CacheRead float64 `yaml:"cache_read"`
	// CacheWrite is the price of input tokens written to the prompt cache.
	CacheWrite float64 `yaml:"cache_write"`
	// Output is the price of output tokens.
	Output float64 `yaml:"output"`
}

// Prices is a price table: the first row whose Model matches a model is its price.
type Prices []Price

// Validate checks that every row names a model and has finite, non-negative prices.
func (p Prices) Validate() error {
	var errs []error
	for i, r := range p {
		if strings.TrimSpace(r.Model) == "" || r.Model == "*" {
			errs = append(errs, fmt.Errorf("prices[%d]: model is required", i))
		}
		for _, v := range []float64{r.Input, r.CacheRead, r.CacheWrite, r.Output} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				errs = append(errs, fmt.Errorf("prices[%d] (%s): prices must be finite and not negative", i, r.Model))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// Lookup returns the price of the first model of models (e.g. the model the provider reported,
// then the configured one) the table prices.
func (p Prices) Lookup(models ...string) (Price, bool) {
	for _, m := range models {
		if m == "" {
			continue
		}
		for _, r := range p {
			if r.Model == m || strings.HasSuffix(r.Model, "*") && strings.HasPrefix(m, strings.TrimSuffix(r.Model, "*")) {
				return r, true
			}
		}
	}
	return Price{}, false
}

// Cost is what o's usage costs at p.
func (p Price) Cost(o summary.Output) float64 {
	return (float64(o.UncachedInputTokens())*p.Input + float64(o.CacheReadTokens)*p.CacheRead +
		float64(o.CacheWriteTokens)*p.CacheWrite + float64(o.OutputTokens)*p.Output) / 1e6
}

// usageAttributes are the span attributes of o's usage (GenAI semantic conventions: the
// input tokens include the cache reads and writes) and its estimated cost; none for a call
// that reported no usage.
func usageAttributes(o summary.Output) []attribute.KeyValue {
	if o.InputTokens <= 0 && o.OutputTokens <= 0 {
		return nil
	}
	kv := []attribute.KeyValue{
		AttrUsageInputTokens.Int64(o.InputTokens), AttrUsageOutputTokens.Int64(o.OutputTokens),
		AttrUsageCacheRead.Int64(o.CacheReadTokens), AttrUsageCacheCreation.Int64(o.CacheWriteTokens),
	}
	if o.Cost > 0 {
		kv = append(kv, AttrCost.Float64(o.Cost))
	}
	return kv
}

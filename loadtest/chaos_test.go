package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/compactord/compactord/summarize"
	"gopkg.in/yaml.v3"
)

// TestChaosServiceConfig: the service config that rides in ghz's load-balancing name
// becomes valid JSON with the retry policy once ghz wraps it.
func TestChaosServiceConfig(t *testing.T) {
	var sc struct {
		LoadBalancingPolicy string `json:"loadBalancingPolicy"`
		MethodConfig        []struct {
			RetryPolicy struct {
				MaxAttempts          int      `json:"maxAttempts"`
				RetryableStatusCodes []string `json:"retryableStatusCodes"`
			} `json:"retryPolicy"`
		} `json:"methodConfig"`
	}
	wrapped := fmt.Sprintf(`{"loadBalancingPolicy":"%s"}`, chaosServiceConfig) // as ghz's requester does
	if err := json.Unmarshal([]byte(wrapped), &sc); err != nil {
		t.Fatalf("%v in %s", err, wrapped)
	}
	if sc.LoadBalancingPolicy != "round_robin" || len(sc.MethodConfig) != 1 ||
		sc.MethodConfig[0].RetryPolicy.MaxAttempts < 2 || strings.Join(sc.MethodConfig[0].RetryPolicy.RetryableStatusCodes, ",") != "UNAVAILABLE" {
		t.Errorf("service config %+v", sc)
	}
}

// TestChaosConfig: the replicas' summarizer file parses, and its default falls back.
func TestChaosConfig(t *testing.T) {
	var c summarize.Config
	dec := yaml.NewDecoder(strings.NewReader(chaosConfig("http://127.0.0.1:1/v1")))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.DefaultSummarizer != "llm-fb" || c.Summarizers[0].Fallback != "extractive" || c.Summarizers[1].Fallback != "" {
		t.Errorf("config %+v", c)
	}
}

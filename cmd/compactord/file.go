package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/compactord/compactord/auth"
	"github.com/compactord/compactord/limit"
	"github.com/compactord/compactord/summarize"
	"gopkg.in/yaml.v3"
)

// fileConfig is the --config YAML document: named summarizers, authentication and
// per-tenant limits. Unknown fields are errors, so a typo never silently falls back to a
// default.
type fileConfig struct {
	summarize.Config `yaml:",inline"`
	Auth             auth.Config  `yaml:"auth"`
	Limits           limit.Config `yaml:"limits"`
}

// readConfigFile reads and parses --config; an empty path gives the zero configuration.
func readConfigFile(path string) (fileConfig, error) {
	if path == "" {
		return fileConfig{}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fileConfig{}, fmt.Errorf("--config: %w", err)
	}
	fc, err := parseConfigFile(b)
	if err != nil {
		return fc, fmt.Errorf("--config %s: %w", path, err)
	}
	return fc, nil
}

// parseConfigFile parses and validates a --config document: every section's own checks
// (summarizers, limits) without reading any key or credential file.
func parseConfigFile(b []byte) (fileConfig, error) {
	var fc fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
		return fc, err
	}
	if err := fc.Config.Validate(); err != nil {
		return fc, err
	}
	if err := fc.Limits.Validate(); err != nil {
		return fc, fmt.Errorf("limits: %w", err)
	}
	return fc, nil
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Suite is the contents of scenarios.yaml: the baseline and the scenarios, run in file order.
type Suite struct {
	// Defaults fill the zero fields of every scenario.
	Defaults Defaults `yaml:"defaults"`
	// Baseline names the scenario every other one is compared with (the health check).
	Baseline string `yaml:"baseline"`
	// Scenarios are run in this order, the baseline first whatever its position.
	Scenarios []Scenario `yaml:"scenarios"`
}

// Defaults are the load settings a scenario inherits when it leaves them empty.
type Defaults struct {
	// Concurrency is the number of ghz workers; default 16.
	Concurrency uint `yaml:"concurrency"`
	// Duration is the measured time of each scenario; default 10s.
	Duration Duration `yaml:"duration"`
	// Warmup is the unmeasured run before each scenario; default none.
	Warmup Duration `yaml:"warmup"`
	// Slices is how many baseline-paired slices Duration is split into; default 1.
	Slices int `yaml:"slices"`
}

// Scenario is one load: a call, how its request is built, and how hard it is driven.
type Scenario struct {
	// Name is unique in the suite; it names the scenario in the report.
	Name string `yaml:"name"`
	// Call is the fully qualified method, "package.Service/Method".
	Call string `yaml:"call"`
	// Conversation, when set, fills the request's messages from a corpus file (lifted by the
	// server's Lift RPC and cut at a turn boundary).
	Conversation *ConversationSource `yaml:"conversation"`
	// Body, when set, fills the request's body field with a corpus file's raw bytes (Lift).
	Body *BodySource `yaml:"body"`
	// Request is the rest of the request as protobuf JSON (field names or their camelCase).
	Request map[string]any `yaml:"request"`
	// Cache is "" (plain load), "hit" (one warming call, then the identical request from every
	// worker; each preflight call must be a cache hit) or "miss" (each request's first user
	// message is made unique so its prefix hash is new; each call must be a cache miss).
	Cache string `yaml:"cache"`
	// Concurrency is the number of ghz workers; 0 means the default.
	Concurrency uint `yaml:"concurrency"`
	// Duration is how long the measured load runs without -soak; 0 means the default. A
	// soak goes on with more slices of the same length, so the scenario runs longer.
	Duration Duration `yaml:"duration"`
	// Slices splits Duration into this many slices, one per round, each right after an
	// equally long slice of the baseline, so scenario and baseline see the same background
	// load; 0 means the default.
	Slices int `yaml:"slices"`
	// Warmup is an unmeasured load run just before the measured one; 0 means the default.
	Warmup Duration `yaml:"warmup"`
	// Target is the pass mark relative to the baseline; nil means report only.
	Target *Target `yaml:"target"`
}

// ConversationSource names the corpus conversation a request carries.
type ConversationSource struct {
	// File is a corpus file name, e.g. "taubench-airline-t08-r2.openai.json".
	File string `yaml:"file"`
	// Messages keeps at most this many leading messages, cut at a turn boundary so no tool
	// call is separated from its result; 0 keeps the whole conversation.
	Messages int `yaml:"messages"`
}

// BodySource names the corpus file sent as a provider request body.
type BodySource struct {
	// File is a corpus file name; its bytes become the request's body field.
	File string `yaml:"file"`
}

// Target is a scenario's pass mark as ratios to the baseline measured in the same run.
type Target struct {
	// RPSRatio is the least RPS / baseline RPS that passes.
	RPSRatio float64 `yaml:"rps_ratio"`
	// P99Ratio is the largest p99 / baseline p99 that passes; 0 means not checked.
	P99Ratio float64 `yaml:"p99_ratio"`
}

// Duration is a time.Duration written as "10s" in YAML.
type Duration time.Duration

// UnmarshalYAML reads a duration string such as "10s" or "1m30s".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	if v < 0 {
		return fmt.Errorf("line %d: negative duration %s", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

var callRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*\.[A-Za-z_][A-Za-z0-9_]*/[A-Za-z_][A-Za-z0-9_]*$`)

// ParseSuite reads a suite, rejecting unknown fields, applies the defaults and checks every
// scenario. The returned suite has the baseline first.
func ParseSuite(r io.Reader) (*Suite, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	var s Suite
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("scenarios: %w", err)
	}
	if s.Defaults.Concurrency == 0 {
		s.Defaults.Concurrency = 16
	}
	if s.Defaults.Duration == 0 {
		s.Defaults.Duration = Duration(10 * time.Second)
	}
	if s.Defaults.Slices == 0 {
		s.Defaults.Slices = 1
	}
	var errs []error
	seen := map[string]bool{}
	base := -1
	for i := range s.Scenarios {
		sc := &s.Scenarios[i]
		if sc.Concurrency == 0 {
			sc.Concurrency = s.Defaults.Concurrency
		}
		if sc.Duration == 0 {
			sc.Duration = s.Defaults.Duration
		}
		if sc.Warmup == 0 {
			sc.Warmup = s.Defaults.Warmup
		}
		if sc.Slices == 0 {
			sc.Slices = s.Defaults.Slices
		}
		if err := sc.check(); err != nil {
			errs = append(errs, fmt.Errorf("scenario %d (%q): %w", i, sc.Name, err))
		}
		if seen[sc.Name] {
			errs = append(errs, fmt.Errorf("scenario %d: duplicate name %q", i, sc.Name))
		}
		seen[sc.Name] = true
		if sc.Name == s.Baseline {
			base = i
		}
	}
	if len(s.Scenarios) == 0 {
		errs = append(errs, errors.New("no scenarios"))
	}
	if base < 0 {
		errs = append(errs, fmt.Errorf("baseline %q is not a scenario", s.Baseline))
	} else if s.Scenarios[base].Target != nil {
		errs = append(errs, fmt.Errorf("baseline %q cannot have a target", s.Baseline))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("scenarios: %w", err)
	}
	if base > 0 {
		b := s.Scenarios[base]
		copy(s.Scenarios[1:base+1], s.Scenarios[:base])
		s.Scenarios[0] = b
	}
	return &s, nil
}

func (sc *Scenario) check() error {
	var errs []error
	if sc.Name == "" || strings.ContainsAny(sc.Name, " |`") {
		errs = append(errs, fmt.Errorf("name %q must be non-empty without spaces, '|' or '`'", sc.Name))
	}
	if !callRE.MatchString(sc.Call) {
		errs = append(errs, fmt.Errorf("call %q is not package.Service/Method", sc.Call))
	}
	if sc.Slices < 1 || time.Duration(sc.Duration)/time.Duration(max(sc.Slices, 1)) < 500*time.Millisecond {
		errs = append(errs, fmt.Errorf("slices %d: need at least one, each at least 500ms of the %s duration", sc.Slices, time.Duration(sc.Duration)))
	}
	if sc.Conversation != nil && sc.Body != nil {
		errs = append(errs, errors.New("conversation and body are exclusive"))
	}
	if c := sc.Conversation; c != nil && (c.File == "" || c.Messages < 0) {
		errs = append(errs, errors.New("conversation needs a file and messages >= 0"))
	}
	if sc.Body != nil && sc.Body.File == "" {
		errs = append(errs, errors.New("body needs a file"))
	}
	switch sc.Cache {
	case "":
	case "hit", "miss":
		if sc.Conversation == nil {
			errs = append(errs, fmt.Errorf("cache %q needs a conversation", sc.Cache))
		}
	default:
		errs = append(errs, fmt.Errorf("cache %q is not \"\", \"hit\" or \"miss\"", sc.Cache))
	}
	if t := sc.Target; t != nil && (t.RPSRatio <= 0 || t.P99Ratio < 0) {
		errs = append(errs, errors.New("target needs rps_ratio > 0 and p99_ratio >= 0"))
	}
	if _, err := sc.requestJSON(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// requestJSON is the request template as JSON ("{}" when empty).
func (sc *Scenario) requestJSON() ([]byte, error) {
	if len(sc.Request) == 0 {
		return []byte("{}"), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(sc.Request); err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	return bytes.TrimSpace(buf.Bytes()), nil
}

// Method is the call as a gRPC method path, "/package.Service/Method".
func (sc *Scenario) Method() string { return "/" + sc.Call }

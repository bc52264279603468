package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseSuite(t *testing.T) {
	const health = "  - name: health\n    call: grpc.health.v1.Health/Check\n"
	tests := []struct {
		name    string
		yaml    string
		wantErr string // substring; empty means success
		check   func(t *testing.T, s *Suite)
	}{
		{
			name: "defaults fill scenarios and the baseline moves first",
			yaml: "baseline: health\nscenarios:\n" +
				"  - name: plan\n    call: compactor.v1.CompactorService/Plan\n    conversation: {file: a.openai.json, messages: 20}\n    target: {rps_ratio: 0.7, p99_ratio: 3}\n    duration: 4s\n" +
				health,
			check: func(t *testing.T, s *Suite) {
				if got := s.Scenarios[0].Name; got != "health" {
					t.Errorf("first scenario %q, want the baseline", got)
				}
				p := s.Scenarios[1]
				if p.Concurrency != 16 || time.Duration(p.Duration) != 4*time.Second || p.Slices != 1 {
					t.Errorf("plan: concurrency %d duration %s slices %d", p.Concurrency, time.Duration(p.Duration), p.Slices)
				}
				if time.Duration(s.Scenarios[0].Duration) != 10*time.Second {
					t.Errorf("health duration %s, want the 10s default", time.Duration(s.Scenarios[0].Duration))
				}
				if p.Target == nil || p.Target.RPSRatio != 0.7 || p.Target.P99Ratio != 3 {
					t.Errorf("target %+v", p.Target)
				}
				if p.Method() != "/compactor.v1.CompactorService/Plan" {
					t.Errorf("method %q", p.Method())
				}
			},
		},
		{
			name: "explicit defaults",
			yaml: "defaults: {concurrency: 4, duration: 3s, warmup: 1s, slices: 3}\nbaseline: health\nscenarios:\n" + health,
			check: func(t *testing.T, s *Suite) {
				h := s.Scenarios[0]
				if h.Concurrency != 4 || time.Duration(h.Duration) != 3*time.Second || time.Duration(h.Warmup) != time.Second || h.Slices != 3 {
					t.Errorf("health %+v", h)
				}
			},
		},
		{
			name:    "unknown field",
			yaml:    "baseline: health\nscenarios:\n" + health + "    concurrancy: 3\n",
			wantErr: "concurrancy",
		},
		{
			name:    "bad call",
			yaml:    "baseline: health\nscenarios:\n  - name: health\n    call: Check\n",
			wantErr: "not package.Service/Method",
		},
		{
			name:    "duplicate name",
			yaml:    "baseline: health\nscenarios:\n" + health + health,
			wantErr: "duplicate name",
		},
		{
			name:    "missing baseline",
			yaml:    "baseline: nope\nscenarios:\n" + health,
			wantErr: `baseline "nope" is not a scenario`,
		},
		{
			name:    "baseline with a target",
			yaml:    "baseline: health\nscenarios:\n" + health + "    target: {rps_ratio: 1}\n",
			wantErr: "cannot have a target",
		},
		{
			name:    "cache without a conversation",
			yaml:    "baseline: health\nscenarios:\n" + health + "  - name: c\n    call: compactor.v1.CompactorService/Compact\n    cache: hit\n",
			wantErr: "needs a conversation",
		},
		{
			name:    "unknown cache mode",
			yaml:    "baseline: health\nscenarios:\n" + health + "  - name: c\n    call: compactor.v1.CompactorService/Compact\n    conversation: {file: a.openai.json}\n    cache: warm\n",
			wantErr: `cache "warm"`,
		},
		{
			name:    "conversation and body",
			yaml:    "baseline: health\nscenarios:\n" + health + "  - name: l\n    call: compactor.v1.CompactorService/Lift\n    conversation: {file: a.openai.json}\n    body: {file: a.openai.json}\n",
			wantErr: "exclusive",
		},
		{
			name:    "bad duration",
			yaml:    "baseline: health\nscenarios:\n" + health + "    duration: ten\n",
			wantErr: "invalid duration",
		},
		{
			name:    "slices too short",
			yaml:    "baseline: health\nscenarios:\n" + health + "    duration: 1s\n    slices: 4\n",
			wantErr: "slices 4",
		},
		{
			name:    "zero target",
			yaml:    "baseline: health\nscenarios:\n" + health + "  - name: p\n    call: compactor.v1.CompactorService/Plan\n    target: {p99_ratio: 3}\n",
			wantErr: "rps_ratio > 0",
		},
		{
			name:    "no scenarios",
			yaml:    "baseline: health\n",
			wantErr: "no scenarios",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSuite(strings.NewReader(tt.yaml))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, s)
		})
	}
}

// The shipped scenario file parses, every call exists with the fields its sources fill, the
// corpus files it names are in the corpus and every request template is valid for its call.
func TestShippedScenarios(t *testing.T) {
	f, err := os.Open("scenarios.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ParseSuite(f)
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	corpus, err := corpusDir(filepath.Dir(wd))
	if err != nil {
		t.Skip(err)
	}
	names := map[string]bool{}
	for _, sc := range s.Scenarios {
		names[sc.Name] = true
		if _, err := requestTemplate(&sc); err != nil {
			t.Errorf("%s: %v", sc.Name, err)
			continue
		}
		var file string
		switch {
		case sc.Conversation != nil:
			file = sc.Conversation.File
		case sc.Body != nil:
			file = sc.Body.File
		default:
			continue
		}
		if _, err := os.Stat(corpus + "/" + file); err != nil {
			t.Errorf("%s: %v", sc.Name, err)
		}
	}
	for _, want := range []string{"health", "plan-20", "lower-anthropic-20", "compact-hit-20", "compact-miss-20"} {
		if !names[want] {
			t.Errorf("scenario %s missing", want)
		}
	}
}

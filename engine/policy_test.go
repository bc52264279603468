package engine

import (
	"errors"
	"math"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// resolved returns p resolved (resolvePolicyInto into a new policy).
func resolved(p *compactorv1.Policy) (*policy, error) {
	r := new(policy)
	if err := resolvePolicyInto(p, r); err != nil {
		return nil, err
	}
	return r, nil
}

func TestResolvePolicyNamesTheField(t *testing.T) {
	tests := []struct {
		name  string
		p     *compactorv1.Policy
		field string // "" = valid
	}{
		{"nil policy", nil, "policy.context_window"},
		{"window only", &compactorv1.Policy{ContextWindow: 8000}, ""},
		{"trigger tokens only", &compactorv1.Policy{TriggerTokens: 5000}, ""},
		{"window zero", &compactorv1.Policy{}, "policy.context_window"},
		{"window negative", &compactorv1.Policy{ContextWindow: -1}, "policy.context_window"},
		{"reserve equals window", &compactorv1.Policy{ContextWindow: 10000, ReserveOutputTokens: 10000}, "policy.reserve_output_tokens"},
		{"reserve above window", &compactorv1.Policy{ContextWindow: 10000, ReserveOutputTokens: 50000}, "policy.reserve_output_tokens"},
		{"reserve negative", &compactorv1.Policy{ContextWindow: 10000, ReserveOutputTokens: -5}, "policy.reserve_output_tokens"},
		{"trigger ratio zero is default", &compactorv1.Policy{ContextWindow: 10000, TriggerRatio: 0}, ""},
		{"trigger ratio one", &compactorv1.Policy{ContextWindow: 10000, TriggerRatio: 1, TargetRatio: 0.5}, ""},
		{"trigger ratio above one", &compactorv1.Policy{ContextWindow: 10000, TriggerRatio: 1.5}, "policy.trigger_ratio"},
		{"trigger ratio negative", &compactorv1.Policy{ContextWindow: 10000, TriggerRatio: -0.5}, "policy.trigger_ratio"},
		{"trigger ratio NaN", &compactorv1.Policy{ContextWindow: 10000, TriggerRatio: math.NaN()}, "policy.trigger_ratio"},
		{"target ratio above one", &compactorv1.Policy{ContextWindow: 10000, TargetRatio: 2}, "policy.target_ratio"},
		{"target above trigger", &compactorv1.Policy{ContextWindow: 10000, TriggerRatio: 0.5, TargetRatio: 0.7}, "policy.target_ratio"},
		{"prepare ratio of one", &compactorv1.Policy{ContextWindow: 10000, PrepareRatio: 1}, "policy.prepare_ratio"},
		{"negative prepare ratio", &compactorv1.Policy{ContextWindow: 10000, PrepareRatio: -0.1}, "policy.prepare_ratio"},
		{"trigger tokens negative", &compactorv1.Policy{ContextWindow: 10000, TriggerTokens: -1}, "policy.trigger_tokens"},
		{"trigger tokens above usable", &compactorv1.Policy{ContextWindow: 10000, TriggerTokens: 9500}, "policy.trigger_tokens"},
		{"keep tokens negative", &compactorv1.Policy{ContextWindow: 10000, KeepRecentTokens: -1}, "policy.keep_recent_tokens"},
		{"keep tokens above usable", &compactorv1.Policy{ContextWindow: 10000, KeepRecentTokens: 9500}, "policy.keep_recent_tokens"},
		{"keep turns negative", &compactorv1.Policy{ContextWindow: 10000, KeepRecentTurns: -2}, "policy.keep_recent_turns"},
		{"summary room negative", &compactorv1.Policy{ContextWindow: 10000, SummaryMaxTokens: -1}, "policy.summary_max_tokens"},
		{"summary room fills window", &compactorv1.Policy{ContextWindow: 10000, SummaryMaxTokens: 9000}, "policy.summary_max_tokens"},
		{"unknown tokenizer", &compactorv1.Policy{ContextWindow: 10000, Tokenizer: "gpt2"}, "policy.tokenizer"},
		{"usage negative", &compactorv1.Policy{ContextWindow: 10000, ReportedUsage: &compactorv1.Usage{InputTokens: -1, MessageCount: 1}}, "policy.reported_usage.input_tokens"},
		{"usage without count", &compactorv1.Policy{ContextWindow: 10000, ReportedUsage: &compactorv1.Usage{InputTokens: 10}}, "policy.reported_usage.message_count"},
		{"usage count negative", &compactorv1.Policy{ContextWindow: 10000, ReportedUsage: &compactorv1.Usage{InputTokens: 10, MessageCount: -1}}, "policy.reported_usage.message_count"},
		{"prune keep negative", &compactorv1.Policy{ContextWindow: 10000, Prune: &compactorv1.PrunePolicy{KeepRecent: -1}}, "policy.prune.keep_recent"},
		{"prune min negative", &compactorv1.Policy{ContextWindow: 10000, Prune: &compactorv1.PrunePolicy{MinOutputTokens: -1}}, "policy.prune.min_output_tokens"},
		{"prune clear negative", &compactorv1.Policy{ContextWindow: 10000, Prune: &compactorv1.PrunePolicy{ClearAtLeastTokens: -1}}, "policy.prune.clear_at_least_tokens"},
		{"prune empty exclude", &compactorv1.Policy{ContextWindow: 10000, Prune: &compactorv1.PrunePolicy{ExcludeTools: []string{"a", ""}}}, "policy.prune.exclude_tools[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := resolvePolicyInto(tt.p, new(policy))
			if tt.field == "" {
				if err != nil {
					t.Fatalf("resolvePolicyInto = %v, want nil", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("resolvePolicyInto = %v, want a *ValidationError wrapping ErrInvalid", err)
			}
			for _, v := range ve.Violations {
				if v.Field == tt.field {
					return
				}
			}
			t.Errorf("violations %v do not name %s", ve.Violations, tt.field)
		})
	}
}

func TestResolvePolicyDefaults(t *testing.T) {
	tests := []struct {
		p                                        *compactorv1.Policy
		reserve, usable, trigger, target, keepTk int64
	}{
		{&compactorv1.Policy{ContextWindow: 128000}, 12800, 115200, 92160, 69120, 34560},
		{&compactorv1.Policy{ContextWindow: 400000}, 20000, 380000, 304000, 228000, 114000},
		{&compactorv1.Policy{ContextWindow: 200000, ReserveOutputTokens: 32000, TriggerRatio: 0.9, TargetRatio: 0.5, KeepRecentTokens: 20000},
			32000, 168000, 151200, 84000, 20000},
		// trigger_tokens replaces the ratio; the target never exceeds the trigger.
		{&compactorv1.Policy{ContextWindow: 100000, TriggerTokens: 30000}, 10000, 90000, 30000, 30000, 27000},
		// Without a window, the trigger stands in for the usable window.
		{&compactorv1.Policy{TriggerTokens: 50000}, 0, 50000, 50000, 30000, 15000},
	}
	for _, tt := range tests {
		r, err := resolved(tt.p)
		if err != nil {
			t.Fatal(err)
		}
		if r.reserve != tt.reserve || r.usable != tt.usable || r.trigger != tt.trigger || r.target != tt.target || r.keepTokens != tt.keepTk {
			t.Errorf("%v: reserve %d usable %d trigger %d target %d keep %d; want %d %d %d %d %d", tt.p,
				r.reserve, r.usable, r.trigger, r.target, r.keepTokens, tt.reserve, tt.usable, tt.trigger, tt.target, tt.keepTk)
		}
		if r.keepTurns != DefaultKeepRecentTurns || r.summaryRoom != min(DefaultSummaryMaxTokens, floorRatio(DefaultSummaryRatio, r.usable)) || r.keepResults != DefaultPruneKeepRecent || r.minOutput != DefaultPruneMinOutputTokens {
			t.Errorf("%v: defaults not applied: %+v", tt.p, r)
		}
	}
}

// TestDefaultsNeverInvalid: a policy that sets only a window, however small, is valid; the
// summary room and the requests' budget follow the usable window.
func TestDefaultsNeverInvalid(t *testing.T) {
	for _, w := range []int64{10, 100, 925, 1000, 5000, 100000, 1 << 30} {
		r, err := resolved(&compactorv1.Policy{ContextWindow: w})
		if err != nil {
			t.Errorf("window %d: %v", w, err)
			continue
		}
		if r.summaryRoom >= r.usable && r.usable > 0 || r.summaryRoom > DefaultSummaryMaxTokens {
			t.Errorf("window %d: summary room %d, usable %d", w, r.summaryRoom, r.usable)
		}
		if r.keepRequests > DefaultKeepUserMessagesTokens || r.keepRequests > r.usable {
			t.Errorf("window %d: requests' budget %d, usable %d", w, r.keepRequests, r.usable)
		}
	}
	// A value the caller set is still checked.
	if _, err := resolved(&compactorv1.Policy{ContextWindow: 1000, SummaryMaxTokens: 2000}); err == nil {
		t.Error("summary_max_tokens 2000 in a window of 1000: no error")
	}
}

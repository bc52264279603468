package measure

import (
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

func TestAssistantNear(t *testing.T) {
	// user, assistant, user, assistant, …: the assistant message nearest to 70%.
	tests := []struct {
		roles string
		share float64
		want  int
	}{
		{"uauauauaua", 0.7, 7},
		{"suauauauau", 0.7, 8},
		{"suauauauau", 1, 8},
		{"uu", 0.7, -1},
		{"au", 0.7, -1},
	}
	for _, tt := range tests {
		if got := AssistantNear(rolesMsgs(tt.roles), tt.share); got != tt.want {
			t.Errorf("AssistantNear(%s, %v) = %d, want %d", tt.roles, tt.share, got, tt.want)
		}
	}
}

func rolesMsgs(roles string) []*compactorv1.Message {
	var out []*compactorv1.Message
	for _, r := range roles {
		role := map[rune]compactorv1.Role{'u': compactorv1.Role_ROLE_USER, 'a': compactorv1.Role_ROLE_ASSISTANT, 's': compactorv1.Role_ROLE_SYSTEM}[r]
		out = append(out, &compactorv1.Message{Role: role})
	}
	return out
}

package service

import (
	"encoding/json"
	"fmt"
	"slices"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/engine"
	"google.golang.org/protobuf/proto"
)

// Provider compactions a target provider cannot take, replaced before planning.

// compactionProvider is the ProviderPart provider whose compactions a target format takes.
var compactionProvider = map[compactorv1.Provider]string{
	compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES: engine.ProviderAnthropic,
	compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:   engine.ProviderOpenAI,
}

// replaceForeignCompactions returns msgs with every provider compaction that target cannot
// take replaced by a text part saying so, and a warning per replacement. Such a message is
// then an ordinary one, so what follows it (and any history the request still holds before
// it) is summarized into a compactord summary; the caller's msgs are not modified.
// Unspecified target changes nothing.
func replaceForeignCompactions(msgs []*compactorv1.Message, target compactorv1.Provider) ([]*compactorv1.Message, []string) {
	if target == compactorv1.Provider_PROVIDER_UNSPECIFIED {
		return msgs, nil
	}
	var out []*compactorv1.Message
	var warnings []string
	for i, m := range msgs {
		for j, p := range m.GetParts() {
			pp := p.GetProvider()
			if pp.GetType() != "compaction" || pp.GetProvider() == compactionProvider[target] {
				continue
			}
			if out == nil {
				out = slices.Clone(msgs)
			}
			if out[i] == m {
				out[i] = proto.CloneOf(m)
			}
			text := "[" + pp.GetProvider() + " compacted the conversation before this point; its summary is not readable]"
			var block struct{ Content string }
			if json.Unmarshal([]byte(pp.GetJson()), &block) == nil && block.Content != "" { // Anthropic's is text
				text = engine.ReplacedCompactionText(pp.GetProvider(), block.Content)
			}
			out[i].Parts[j] = &compactorv1.Part{Content: &compactorv1.Part_Text{Text: &compactorv1.TextPart{Text: text}}}
			warnings = append(warnings, fmt.Sprintf("messages[%d].parts[%d]: %s compaction cannot be sent to %s; replaced by a compactord summary of what follows it",
				i, j, pp.GetProvider(), target))
		}
	}
	if out == nil {
		return msgs, nil
	}
	return out, warnings
}

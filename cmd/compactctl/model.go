package main

import (
	"encoding/json"
	"fmt"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// modelInBody are the targets whose request body names its model ("model"); Gemini and
// Bedrock take it in the URL.
var modelInBody = map[compactorv1.Provider]bool{
	compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES: true,
	compactorv1.Provider_PROVIDER_OPENAI_CHAT:        true,
	compactorv1.Provider_PROVIDER_OPENAI_RESPONSES:   true,
}

// withModel returns the base body of a Lower to the target with --model written as its
// "model" when the target's body names its model and base names none, and the model for
// LowerRequest.model. A model base names wins over --model: then --model is not sent (the
// body's decides the model's rules) and a warning says so. A base that is not a JSON object
// is returned as it is, for the server to refuse.
func (c *command) withModel(base string, to compactorv1.Provider) (string, string) {
	if c.model == "" || !modelInBody[to] {
		return base, c.model
	}
	obj := strings.TrimSpace(base)
	if obj == "" {
		obj = "{}"
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal([]byte(obj), &members); err != nil || !strings.HasPrefix(obj, "{") {
		return base, c.model
	}
	if raw, ok := members["model"]; ok {
		var named string
		if json.Unmarshal(raw, &named) == nil && named == c.model {
			return base, c.model
		}
		c.warn("lower", []string{fmt.Sprintf("--model %s not used: %s names the model %s", c.model, c.baseOrigin(), raw)})
		return base, ""
	}
	model, err := json.Marshal(c.model)
	if err != nil {
		return base, c.model
	}
	if len(members) == 0 {
		return `{"model":` + string(model) + `}`, c.model
	}
	return `{"model":` + string(model) + "," + obj[1:], c.model
}

// baseOrigin names where the base body of a Lower came from: --base-body, or the input's
// own fields.
func (c *command) baseOrigin() string {
	if c.baseBody != "" {
		return "--base-body " + c.baseBody
	}
	return c.inputName() + " (its own fields)"
}

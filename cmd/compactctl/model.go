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

// withModel returns the base body of a Lower of doc to the target with --model written as
// its "model" when the target's body names its model and neither base nor the input's own
// fields carried to the target (carriesModel) name one, and the model for
// LowerRequest.model. A model they name wins over --model: then --model is not sent (the
// body's decides the model's rules) and a warning says so. A base that is not a JSON object
// is returned as it is, for the server to refuse.
func (c *command) withModel(base string, doc *conversation, to compactorv1.Provider) (string, string) {
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
	named, origin := members["model"], c.baseOrigin()
	if named == nil && carriesModel(doc.Provider, to) {
		var rest map[string]json.RawMessage
		if json.Unmarshal([]byte(doc.RestBody), &rest) == nil {
			named, origin = rest["model"], c.inputName()+" (its own fields)"
		}
	}
	if named != nil {
		var name string
		if json.Unmarshal(named, &name) == nil && name == c.model {
			return base, c.model
		}
		c.warn("lower", []string{fmt.Sprintf("--model %s not used: %s names the model %s", c.model, origin, named)})
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

// carriesModel reports whether a lowered body of provider to keeps the model the input's
// own fields (in the shape of provider from) name: within one provider, and between OpenAI's
// two formats.
func carriesModel(from, to compactorv1.Provider) bool {
	openai := func(p compactorv1.Provider) bool {
		return p == compactorv1.Provider_PROVIDER_OPENAI_CHAT || p == compactorv1.Provider_PROVIDER_OPENAI_RESPONSES
	}
	return from == to || openai(from) && openai(to)
}

// baseOrigin names where the base body of a Lower came from: --base-body.
func (c *command) baseOrigin() string { return "--base-body " + c.baseBody }

package main

import (
	"regexp"
	"strings"
)

// flagOfField maps the request fields that compactctl's flags set to those flags: a message
// names what the user typed (--base-body), not the API field (base_body).
var flagOfField = map[string]string{
	"policy.context_window":     "--context-window",
	"policy.trigger_tokens":     "--trigger-tokens",
	"policy.keep_recent_tokens": "--keep-recent-tokens",
	"policy.summary_max_tokens": "--summary-max-tokens",
	"policy.tokenizer":          "--tokenizer",
	"base_body":                 "--base-body",
	"model":                     "--model",
	"provider":                  "--to",
	"target_provider":           "--to",
	"summarizer":                "--summarizer",
	"instructions":              "--instructions",
}

// fieldWords matches, in running text, the fields of flagOfField whose names cannot be
// mistaken for prose (snake_case, with or without "policy."): "unless trigger_tokens is set".
var fieldWords = regexp.MustCompile(`\b(?:policy\.)?(context_window|trigger_tokens|keep_recent_tokens|summary_max_tokens|base_body)\b`)

// inFlags rewrites the request fields a message names as the flags that set them; a policy
// field that a --policy file set, and no flag, keeps its name (the file's).
func (c *command) inFlags(text string) string {
	return fieldWords.ReplaceAllStringFunc(text, func(m string) string {
		if m == "base_body" {
			return flagOfField[m]
		}
		name := strings.TrimPrefix(m, "policy.")
		flag := flagOfField["policy."+name]
		if c.policyFile != "" && !c.typed[strings.TrimPrefix(flag, "--")] {
			return name
		}
		return flag
	})
}

// flagName names a request field as the user gave it: the flag that sets it, or, for a
// policy field no flag set, its place in the --policy file ("policy.json: reserve_output_tokens").
// Other fields keep their name.
func (c *command) flagName(field string) string {
	name, inPolicy := strings.CutPrefix(field, "policy.")
	flag, ok := flagOfField[field]
	switch {
	case inPolicy && c.policyFile != "" && (!ok || !c.typed[strings.TrimPrefix(flag, "--")]):
		return c.policyFile + ": " + name
	case ok:
		return flag
	}
	return field
}

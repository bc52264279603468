package format

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// Provider state the IR does not model is carried in provider_options: Lift keeps each member
// of a block or item listed below, under its API name, in the part's (or for message-level
// members, the message's) provider_options[provider]; Lower writes it back, as it came, when
// the target is the format it came from. The lists are the members the providers' SDK
// request types define beside the ones the IR models (anthropic-sdk-go ContentBlockParamUnion
// variants, openai-go ChatCompletionMessageParamUnion and ResponseInputItemUnionParam
// variants, google.golang.org/genai Part, aws-sdk-go-v2 bedrockruntime types.ContentBlock);
// docs/PROVIDERS.md tabulates them (TestProvidersTable keeps it in step).
var (
	// Anthropic block members.
	anthropicTextCarried    = []string{"citations"}
	anthropicImageCarried   = []string{"transformations"}
	anthropicDocCarried     = []string{"citations", "context"}
	anthropicToolUseCarried = []string{"caller", "toolset_name"}
	anthropicServerCarried  = []string{"caller"} // server_tool_use and *_tool_result
	anthropicResultCarried  = []string{"toolset_name"}
	responsesItemCarried    = []string{"status", "phase"}         // an output message item (on each of its text parts)
	responsesTextCarried    = []string{"annotations", "logprobs"} // an output_text part
	responsesCallCarried    = []string{"status", "namespace", "caller", "async"}
	responsesOutputCarried  = []string{"status", "name", "namespace", "caller"}
	responsesReasonCarried  = []string{"summary", "content", "status"}
	responsesMessageCarried = []string{"id", "status", "phase"} // user, system and developer message items
	chatMessageCarried      = []string{"name"}                  // system, developer and user messages
	chatAssistantCarried    = []string{"name", "audio", "reasoning_details"}
	chatToolCallCarried     = []string{"extra_content"}
	geminiPartCarried       = []string{"videoMetadata", "mediaResolution"}
	bedrockDocCarried       = []string{"context", "citations"}
)

// anthropicResultOpaque are the blocks an Anthropic tool_result's content may hold
// (anthropic-sdk-go ToolResultBlockParamContentUnion: SearchResultBlockParam,
// ToolReferenceBlockParam, BrowserStateBlockParam) that the IR does not model: Lift keeps each
// whole, as a ProviderPart among the output's content parts, which Lower writes back
// byte-exact to Anthropic and drops, naming it, anywhere else.
var anthropicResultOpaque = []string{"search_result", "tool_reference", "browser_state"}

// anthropicResultBlocks is the refusal of any other block in a tool_result's content.
const anthropicResultBlocks = "tool result content holds only text, image, document, search_result, tool_reference and browser_state blocks"

// Subsets of the lists above that Lower writes in a shape of its own.
var (
	// responsesInputCarried are the responsesItemCarried members of assistant text without
	// an item id, which goes as an input message.
	responsesInputCarried = []string{"phase"}
	// responsesReasonRest are the responsesReasonCarried members an inline reasoning item
	// writes as they came: all but the summary, which it checks against the part's text.
	responsesReasonRest = slices.DeleteFunc(slices.Clone(responsesReasonCarried), func(n string) bool { return n == "summary" })
)

// Option names of state the IR keeps in provider_options under names of its own.
const (
	optItemID        = "itemId"                    // openai: a Responses item id (rs_, fc_, msg_, ...)
	optEncrypted     = "reasoningEncryptedContent" // openai: reasoning encrypted_content
	optRefusal       = "refusal"                   // openai: this text is a refusal
	optReasoningText = "reasoning_content"         // openai: reasoning from a Chat reasoning_content field
	optIsError       = "is_error"                  // anthropic: is_error on rich tool output
	optIDAssigned    = "idAssigned"                // google: Lift gave the call an id the body lacked
	optThoughtSig    = "thoughtSignature"          // google: a part's thought signature
)

// carry keeps the members of obj named in names as provider_options[provider][name] in *o.
// Null members are left out.
func carry(o *map[string]*structpb.Struct, obj, provider string, names []string) {
	for _, n := range names {
		if v := field(obj, n); v != "" && v != "null" {
			setOpt(o, provider, n, toValue(v))
		}
	}
}

// opt returns provider_options[provider][name] (trying each name) and records that Lower
// carried it: options no writer asked for are reported as drops at the end of Lower.
func (l *lowerer) opt(o map[string]*structpb.Struct, provider string, names ...string) *structpb.Value {
	v := option(o, provider, names...)
	l.use(v)
	return v
}

// use records that Lower carried the option value v (nil: none).
func (l *lowerer) use(v *structpb.Value) {
	if v == nil {
		return
	}
	if l.used == nil {
		l.used = map[*structpb.Value]bool{}
	}
	l.used[v] = true
}

// optString is opt for a string option.
func (l *lowerer) optString(o map[string]*structpb.Struct, provider string, names ...string) string {
	return l.opt(o, provider, names...).GetStringValue()
}

// writeCarried writes the carried members of o[provider] named in names, in that order.
func (l *lowerer) writeCarried(o map[string]*structpb.Struct, provider string, names []string) {
	for _, n := range names {
		if v := l.opt(o, provider, n); v != nil {
			l.w.key(n)
			l.w.value(v)
		}
	}
}

// drop records that a field of the IR was not carried to the target; Lower reports one
// warning per field kind with its first occurrence and count.
func (l *lowerer) drop(at fmt.Stringer, field string) {
	if !l.repeated(field) {
		l.note(at.String()+"."+field+": not carried to "+ProviderName(l.req.GetProvider()), field, at)
	}
}

// repeated reports whether a warning under key was recorded before, and if so counts this
// occurrence. Callers build a warning's text only when it is new.
func (l *lowerer) repeated(key string) bool {
	i, ok := l.seen[key]
	if l.seen == nil { // few distinct warnings: a scan, then a map past 16
		for j := range l.notes {
			if l.notes[j].key == key {
				i, ok = j, true
				break
			}
		}
	}
	if ok {
		l.notes[i].count++
	}
	return ok
}

// note records warning text under key, which repeated reported new.
func (l *lowerer) note(text, key string, at any) {
	if len(l.notes) == 16 {
		l.seen = make(map[string]int, 32)
		for i, n := range l.notes {
			l.seen[n.key] = i
		}
	}
	if l.seen != nil {
		l.seen[key] = len(l.notes)
	}
	l.warnings = append(l.warnings, text)
	l.notes = append(l.notes, note{key: key, count: 1, unit: unitOf(at)})
}

// note is the aggregation state of one warning.
type note struct {
	key   string
	count int
	unit  string // what it counts: part, message, or "" (not counted)
}

func unitOf(at any) string {
	switch at.(type) {
	case loc:
		return "part"
	case msgLoc, int:
		return "message"
	case toolLoc:
		return "tool"
	}
	return ""
}

// msgLoc names message i in warnings.
type msgLoc int

func (m msgLoc) String() string { return "messages[" + itoa(int(m)) + "]" }

// finishWarnings appends the counts to warnings that repeated.
func (l *lowerer) finishWarnings() {
	for i, n := range l.notes {
		if n.count > 1 && n.unit != "" {
			l.warnings[i] += " (" + itoa(n.count) + " " + n.unit + "s)"
		}
	}
}

// unusedOptions reports every provider option of the sent messages and their parts that no
// writer carried: one drop per option name. Parts means every part, the content parts of a
// tool result's output included (the one nesting the IR allows: they hold no tool results),
// except those dropped whole (warned on their own) and the content of a dropped result.
func (l *lowerer) unusedOptions() {
	report := func(at fmt.Stringer, o map[string]*structpb.Struct) {
		for _, prov := range sortedKeys(o) {
			for _, name := range sortedKeys(o[prov].GetFields()) {
				if !l.used[o[prov].GetFields()[name]] && !(prov == "google" && name == optIDAssigned) {
					l.drop(at, "provider_options."+prov+"."+name)
				}
			}
		}
	}
	for _, s := range l.msgs {
		if len(s.m.GetProviderOptions()) > 0 {
			report(msgLoc(s.i), s.m.GetProviderOptions())
		}
		for j, p := range s.m.GetParts() {
			if l.skipped[p] {
				continue
			}
			if len(p.GetProviderOptions()) > 0 {
				report(where(s.i, j), p.GetProviderOptions())
			}
			for k, cp := range p.GetToolResult().GetOutput().GetContent().GetParts() {
				if len(cp.GetProviderOptions()) > 0 && !l.skipped[cp] {
					report(where(s.i, j).part(k), cp.GetProviderOptions())
				}
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// dropPart warns (format and args as for warn) that the whole part p is not sent, and
// records it, so that its options are not reported again as "not carried".
func (l *lowerer) dropPart(p *compactorv1.Part, format string, args ...any) {
	l.warn(format, args...)
	l.markSkipped(p)
}

// dropNoForm drops p, whose kind of content the format named form cannot carry.
func (l *lowerer) dropNoForm(p *compactorv1.Part, at loc, form string) {
	l.dropPart(p, "%s: %s has no %s form; dropped", at, partKind(p), form)
}

// dropBlankText drops p, a blank text the format named form rejects as a text block.
func (l *lowerer) dropBlankText(p *compactorv1.Part, at loc, form string) {
	l.dropPart(p, "%s: empty text dropped (%s rejects blank text blocks)", at, form)
}

// dropProviderPart drops the provider part p at at, which the target cannot take: another
// provider's block or item, or one the target format has no place for.
func (l *lowerer) dropProviderPart(at fmt.Stringer, p *compactorv1.Part) {
	pp := p.GetProvider()
	l.drop(at, "provider."+pp.GetProvider()+"."+pp.GetType())
	l.markSkipped(p)
}

// markSkipped records that the whole part p was not sent (and warned about on its own).
func (l *lowerer) markSkipped(p *compactorv1.Part) {
	if l.skipped == nil {
		l.skipped = map[*compactorv1.Part]bool{}
	}
	l.skipped[p] = true
}

// requiredFields are the top-level members a target's API requires beside the conversation
// (anthropic-sdk-go MessageNewParams: model, max_tokens; openai-go ChatCompletionNewParams:
// model). Gemini and Bedrock take the model in the URL.
var requiredFields = map[compactorv1.Provider][]string{
	compactorv1.Provider_PROVIDER_ANTHROPIC_MESSAGES: {"model", "max_tokens"},
	compactorv1.Provider_PROVIDER_OPENAI_CHAT:        {"model"},
}

// checkRequired warns about required top-level members base_body lacks.
func (l *lowerer) checkRequired() {
	missing := ""
	for _, f := range requiredFields[l.req.GetProvider()] {
		if l.baseField(f) == "" {
			if missing != "" {
				missing += " and "
			}
			missing += `"` + f + `"`
		}
	}
	if missing != "" && !l.repeated("base_body") {
		l.note("base_body: lacks "+missing+", which "+ProviderName(l.req.GetProvider())+" requires: pass the target's base_body", "base_body", nil)
	}
}

// StrictError is a strict Lower that would have dropped or changed something: each warning
// names its field. It is a precondition failure (the conversation cannot be carried to that
// target exactly), not a malformed request.
type StrictError struct {
	Target   compactorv1.Provider
	Warnings []string
}

func (e *StrictError) Error() string {
	return "strict lowering to " + ProviderName(e.Target) + " would drop or change: " + strings.Join(e.Warnings, "; ")
}

// Fields returns the field each warning names (the text before its first ": ").
func (e *StrictError) Fields() []string {
	out := make([]string, len(e.Warnings))
	for i, w := range e.Warnings {
		f, _, _ := strings.Cut(w, ": ")
		out[i] = f
	}
	return out
}

// providerPart returns p's ProviderPart when it belongs to provider, else nil.
func providerPartOf(p *compactorv1.Part, provider string) *compactorv1.ProviderPart {
	if pp := p.GetProvider(); pp != nil && pp.GetProvider() == provider {
		return pp
	}
	return nil
}

// opaquePart makes a ProviderPart of a block or item kept byte-exact, with its size
// estimated at a quarter token per byte.
func opaquePart(provider, typ, raw string) *compactorv1.Part {
	return &compactorv1.Part{Content: &compactorv1.Part_Provider{Provider: &compactorv1.ProviderPart{
		Provider: provider, Type: typ, Json: raw,
		TokenCount: (int64(len(raw)) + 3) / 4, TokenCountEstimated: true,
	}}}
}

// richError reports whether a rich (content) tool output was an error: the IR's error
// outputs are text or JSON, so Lift keeps the flag as an option, Anthropic's is_error or
// Bedrock's status, each mapped onto the other.
func (l *lowerer) richError(out *compactorv1.ToolOutput, o map[string]*structpb.Struct) bool {
	if out.GetContent() == nil {
		return false
	}
	a := l.opt(o, "anthropic", optIsError).GetBoolValue()
	b := l.opt(o, "bedrock", "status").GetStringValue() == "error"
	return a || b
}

package format

import (
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// What the OpenAI Chat and OpenAI Responses formats read and write alike.

// functionCall reads an OpenAI function call's "name" (required) and "arguments" members
// from the object fn at p, records the call's name for id and returns its part. OpenAI Chat
// keeps them in a tool call's "function" object, OpenAI Responses in the function_call item.
func (lt *lifter) functionCall(id, fn string, p *jpath) (*compactorv1.Part, error) {
	name, err := str(field(fn, "name"), p.k("name"), true)
	if err != nil {
		return nil, err
	}
	args, err := str(field(fn, "arguments"), p.k("arguments"), false)
	if err != nil {
		return nil, err
	}
	lt.call(id, name)
	return callPart(id, name, args), nil
}

// inlineFile reads an OpenAI file_data value at p, a data: URL or bare base64 (as some
// clients send it, then taken as a PDF), as a file part named name.
func inlineFile(fd, name string, p *jpath) (*compactorv1.Part, error) {
	media, data, ok := parseDataURL(fd)
	if !ok {
		var err error
		if data, err = decodeB64(fd); err != nil {
			return nil, p.invalid("must be a base64 data: URL")
		}
		media = "application/pdf"
	}
	return fileData(data, media, name), nil
}

// openaiImage is the part of an OpenAI image at URL u (a data: URL is read as its bytes),
// with its detail level, when given, kept as the "imageDetail" option.
func openaiImage(u, detail string) *compactorv1.Part {
	part := imageURL(u, "")
	if detail != "" {
		setOpt(&part.ProviderOptions, "openai", "imageDetail", structpb.NewStringValue(detail))
	}
	return part
}

// openaiImageDetail writes an image part's "detail" member from its "imageDetail" option,
// when it has one.
func (l *lowerer) openaiImageDetail(p *compactorv1.Part) {
	if d := l.optString(p.GetProviderOptions(), "openai", "imageDetail"); d != "" {
		l.w.kstr("detail", d)
	}
}

// toolResultOrDrop returns p's tool result, or drops p (a tool message holds nothing else
// in form) and returns nil.
func (l *lowerer) toolResultOrDrop(p *compactorv1.Part, at loc, form string) *compactorv1.ToolResultPart {
	r := p.GetToolResult()
	if r == nil {
		l.dropNoForm(p, at, form)
	}
	return r
}

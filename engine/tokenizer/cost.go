package tokenizer

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

// Token costs of the parts of a message that are not plain text. The tokenizers count text
// exactly; the framing a provider adds around messages, tool calls and media is estimated
// with these constants (in the spirit of OpenAI's cookbook counting: a few tokens per message
// for the role and delimiters).
const (
	// MessageOverheadTokens is added once per message (role and delimiters).
	MessageOverheadTokens = 4
	// ToolCallOverheadTokens is added per tool call (id and call framing) on top of its name
	// and input.
	ToolCallOverheadTokens = 8
	// ToolResultOverheadTokens is added per tool result (call id and framing) on top of its
	// output.
	ToolResultOverheadTokens = 4
	// ApprovalTokens is the cost of an approval request or response (plus the reason's text).
	ApprovalTokens = 8
	// DefaultImageTokens is the cost of an image whose dimensions are unknown (given by URL,
	// or inline in a format whose header is not understood): the most an image costs on
	// Anthropic's API.
	DefaultImageTokens = 1600
	// DefaultFileTokens is the cost of a file whose content is not counted (given by URL, or
	// inline in a binary format other than PDF).
	DefaultFileTokens = 2000
	// PDFPageTokens is the cost of one page of an inline PDF (text plus page image).
	PDFPageTokens = 2000
)

// ProviderPartTokens returns the tokens of an opaque provider part: its token_count (the
// provider's figure, or the estimate Lift recorded), else an estimate of a quarter token per
// byte of its JSON, the density of base64-like encrypted content under BPE tokenizers.
func ProviderPartTokens(p *compactorv1.ProviderPart) int64 {
	if n := p.GetTokenCount(); n > 0 {
		return n
	}
	return (int64(len(p.GetJson())) + 3) / 4
}

// Message returns the tokens of m's content as a model sees it: MessageOverheadTokens plus
// each part's (see Part). It ignores m.token_count.
func (t Text) Message(m *compactorv1.Message) int64 {
	n := int64(MessageOverheadTokens)
	for _, p := range m.GetParts() {
		total, _ := t.Part(p)
		n += total
	}
	return n
}

// Part returns the tokens of p and its payload: the share pruning can remove (a tool
// call's input, a tool result's output; all of a text or media part).
func (t Text) Part(p *compactorv1.Part) (total, payload int64) {
	switch c := p.GetContent().(type) {
	case *compactorv1.Part_Text:
		n := t.Count(c.Text.GetText())
		return n, n
	case *compactorv1.Part_Image:
		n := imageTokens(c.Image)
		return n, n
	case *compactorv1.Part_File:
		n := t.file(c.File)
		return n, n
	case *compactorv1.Part_Reasoning:
		n := t.Count(c.Reasoning.GetText()) + int64(len(c.Reasoning.GetRedactedData())+3)/4
		return n, n
	case *compactorv1.Part_ToolCall:
		in := t.Count(c.ToolCall.GetInputJson())
		return ToolCallOverheadTokens + t.Count(c.ToolCall.GetToolName()) + in, in
	case *compactorv1.Part_ToolResult:
		out := t.output(c.ToolResult.GetOutput())
		return ToolResultOverheadTokens + out, out
	case *compactorv1.Part_ApprovalRequest:
		return ApprovalTokens, 0
	case *compactorv1.Part_ApprovalResponse:
		return ApprovalTokens + t.Count(c.ApprovalResponse.GetReason()), 0
	case *compactorv1.Part_Provider:
		return ProviderPartTokens(c.Provider), 0
	}
	return 0, 0
}

func (t Text) output(o *compactorv1.ToolOutput) int64 {
	switch v := o.GetValue().(type) {
	case *compactorv1.ToolOutput_Text:
		return t.Count(v.Text)
	case *compactorv1.ToolOutput_Json:
		return t.Count(v.Json)
	case *compactorv1.ToolOutput_ErrorText:
		return t.Count(v.ErrorText)
	case *compactorv1.ToolOutput_ErrorJson:
		return t.Count(v.ErrorJson)
	case *compactorv1.ToolOutput_Denied:
		return t.Count(v.Denied)
	case *compactorv1.ToolOutput_Content:
		var n int64
		for _, p := range v.Content.GetParts() {
			total, _ := t.Part(p)
			n += total
		}
		return n
	}
	return 0
}

// file returns the tokens of a file: the text of an inline text file, PDFPageTokens per page
// of an inline PDF, DefaultFileTokens otherwise.
func (t Text) file(f *compactorv1.FilePart) int64 {
	data := f.GetData()
	if len(data) == 0 {
		return DefaultFileTokens
	}
	mt := strings.ToLower(f.GetMediaType())
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = strings.TrimSpace(mt[:i])
	}
	switch {
	case mt == "application/pdf":
		return int64(pdfPages(data)) * PDFPageTokens
	case textual(mt):
		return t.Count(string(data))
	}
	return DefaultFileTokens
}

// textual reports whether a media type is text a model reads as such.
func textual(mt string) bool {
	if strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml") {
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/javascript", "application/x-yaml",
		"application/yaml", "application/x-sh", "application/sql", "application/x-python",
		"application/toml", "application/x-ndjson", "application/csv":
		return true
	}
	return false
}

// pdfPages counts the page objects of a PDF ("/Type /Page", not "/Type /Pages"); at least 1.
func pdfPages(data []byte) int {
	n := 0
	for rest := data; ; {
		i := bytes.Index(rest, []byte("/Type"))
		if i < 0 {
			break
		}
		rest = rest[i+len("/Type"):]
		j := 0
		for j < len(rest) && (rest[j] == ' ' || rest[j] == '\r' || rest[j] == '\n' || rest[j] == '\t') {
			j++
		}
		if bytes.HasPrefix(rest[j:], []byte("/Page")) {
			k := j + len("/Page")
			if k >= len(rest) || !isNameChar(rest[k]) {
				n++
			}
		}
	}
	return max(n, 1)
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// imageTokens returns the tokens of an image: when its dimensions can be read from the
// header of inline PNG, JPEG, GIF or WebP data, the larger of OpenAI's high-detail cost
// (85 + 170 per 512-px tile after fitting in 2048×2048 and scaling the short side to at most
// 768) and Anthropic's (w×h/750 after scaling the long edge to at most 1568, at most 1600);
// DefaultImageTokens otherwise.
func imageTokens(img *compactorv1.ImagePart) int64 {
	w, h, ok := imageSize(img.GetData())
	if !ok {
		return DefaultImageTokens
	}
	return max(openAIImageTokens(w, h), anthropicImageTokens(w, h))
}

func openAIImageTokens(w, h int) int64 {
	fw, fh := float64(w), float64(h)
	if s := 2048 / max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	if s := 768 / min(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	tiles := int64(math.Ceil(fw/512)) * int64(math.Ceil(fh/512))
	return 85 + 170*tiles
}

func anthropicImageTokens(w, h int) int64 {
	fw, fh := float64(w), float64(h)
	if s := 1568 / max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	return min(int64(math.Ceil(fw*fh/750)), 1600)
}

// imageSize reads the pixel dimensions from the header of PNG, GIF, JPEG or WebP data.
func imageSize(d []byte) (w, h int, ok bool) {
	switch {
	case len(d) >= 24 && string(d[:8]) == "\x89PNG\r\n\x1a\n" && string(d[12:16]) == "IHDR":
		w, h = int(binary.BigEndian.Uint32(d[16:20])), int(binary.BigEndian.Uint32(d[20:24]))
	case len(d) >= 10 && (string(d[:6]) == "GIF87a" || string(d[:6]) == "GIF89a"):
		w, h = int(binary.LittleEndian.Uint16(d[6:8])), int(binary.LittleEndian.Uint16(d[8:10]))
	case len(d) >= 4 && d[0] == 0xFF && d[1] == 0xD8:
		w, h = jpegSize(d)
	case len(d) >= 30 && string(d[:4]) == "RIFF" && string(d[8:12]) == "WEBP":
		switch string(d[12:16]) {
		case "VP8 ":
			w = int(binary.LittleEndian.Uint16(d[26:28]) & 0x3fff)
			h = int(binary.LittleEndian.Uint16(d[28:30]) & 0x3fff)
		case "VP8L":
			b := binary.LittleEndian.Uint32(d[21:25])
			w, h = int(b&0x3fff)+1, int(b>>14&0x3fff)+1
		case "VP8X":
			w = int(uint32(d[24])|uint32(d[25])<<8|uint32(d[26])<<16) + 1
			h = int(uint32(d[27])|uint32(d[28])<<8|uint32(d[29])<<16) + 1
		}
	}
	if w <= 0 || h <= 0 || w > 1<<20 || h > 1<<20 {
		return 0, 0, false
	}
	return w, h, true
}

// jpegSize walks JPEG segments to the first start-of-frame marker.
func jpegSize(d []byte) (w, h int) {
	i := 2
	for i+9 < len(d) {
		if d[i] != 0xFF {
			return 0, 0
		}
		marker := d[i+1]
		if marker == 0xFF { // fill byte
			i++
			continue
		}
		if marker == 0xD8 || marker == 0x01 || marker >= 0xD0 && marker <= 0xD7 {
			i += 2
			continue
		}
		size := int(binary.BigEndian.Uint16(d[i+2 : i+4]))
		if marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC {
			return int(binary.BigEndian.Uint16(d[i+7 : i+9])), int(binary.BigEndian.Uint16(d[i+5 : i+7]))
		}
		if size < 2 {
			return 0, 0
		}
		i += 2 + size
	}
	return 0, 0
}

package format

var responsesFields = []string{"input", "instructions"}
var geminiFields = []string{"contents", "systemInstruction", "system_instruction"}
var bedrockFields = []string{"system", "messages"}

func (l *lowerer) responses()             {}
func (l *lowerer) gemini()                {}
func (l *lowerer) bedrock()               {}
func (lt *lifter) responses(string) error { return nil }
func (lt *lifter) gemini(string) error    { return nil }
func (lt *lifter) bedrock(string) error   { return nil }

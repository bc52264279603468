package engine

import compactorv1 "github.com/compactord/compactord/api/compactor/v1"

// toolLink is a tool result and the call it answers.
type toolLink struct {
	msg, part         int32 // the result
	callMsg, callPart int32 // the call; -1 when it was not found
}

// layout is the region and turn structure of a conversation.
type layout struct {
	summary int // index of the latest summary, -1 when none
	class   []msgClass
	// turnStarts are the indexes of the messages that start a turn in the active region, in
	// order. A turn is a user message, or an assistant message with the tool results that
	// answer its calls and any approval request/response in between; cutting before a turn
	// start never separates a call from its result, an approval request from its call or its
	// response, and never drops a pending (unanswered) call or approval.
	turnStarts []int32
	// results are the tool results held by active messages, in order.
	results []toolLink
}

// openRef is a tool call or approval request not answered yet.
type openRef struct {
	id        string
	msg, part int32
}

// analyze computes the layout of msgs (already validated), in sc's memory when sc is not
// nil (the layout is then valid until sc is reused).
func analyze(msgs []*compactorv1.Message, sc *scratch) layout {
	if sc == nil {
		sc = new(scratch)
	}
	n := len(msgs)
	sc.class = resize(sc.class, n)
	lay := layout{summary: LatestSummary(msgs), class: sc.class, turnStarts: sc.turnStarts[:0], results: sc.results[:0]}
	// blocked[c] > 0 after the prefix sum: a cut before message c would split a link.
	sc.blocked = resize(sc.blocked, n+2)
	blocked := sc.blocked
	link := func(i, j int32) {
		if i < j {
			blocked[i+1]++
			blocked[j+1]--
		}
	}
	calls, approvals := sc.open[:0], sc.approvals[:0]
	for i, m := range msgs {
		lay.class[i] = classify(m, i, lay.summary)
		mi := int32(i)
		for pj, p := range m.GetParts() {
			switch c := p.GetContent().(type) {
			case *compactorv1.Part_ToolCall:
				calls = append(calls, openRef{id: c.ToolCall.GetToolCallId(), msg: mi, part: int32(pj)})
			case *compactorv1.Part_ToolResult:
				tl := toolLink{msg: mi, part: int32(pj), callMsg: -1, callPart: -1}
				for k := len(calls) - 1; k >= 0; k-- {
					if calls[k].id == c.ToolResult.GetToolCallId() {
						tl.callMsg, tl.callPart = calls[k].msg, calls[k].part
						link(calls[k].msg, mi)
						calls = append(calls[:k], calls[k+1:]...)
						break
					}
				}
				if lay.class[i] == classActive {
					lay.results = append(lay.results, tl)
				}
			case *compactorv1.Part_ApprovalRequest:
				for k := len(calls) - 1; k >= 0; k-- {
					if calls[k].id == c.ApprovalRequest.GetToolCallId() {
						link(calls[k].msg, mi)
						break
					}
				}
				approvals = append(approvals, openRef{id: c.ApprovalRequest.GetApprovalId(), msg: mi})
			case *compactorv1.Part_ApprovalResponse:
				for k := len(approvals) - 1; k >= 0; k-- {
					if approvals[k].id == c.ApprovalResponse.GetApprovalId() {
						link(approvals[k].msg, mi)
						approvals = append(approvals[:k], approvals[k+1:]...)
						break
					}
				}
			}
		}
	}
	// Pending calls and approvals in the active region stay in the tail.
	for _, r := range calls {
		if int(r.msg) > lay.summary {
			link(r.msg, int32(n))
		}
	}
	for _, r := range approvals {
		if int(r.msg) > lay.summary {
			link(r.msg, int32(n))
		}
	}
	var depth int32
	for c := 0; c < n; c++ {
		depth += blocked[c]
		if depth != 0 || lay.class[c] != classActive {
			continue
		}
		switch msgs[c].GetRole() {
		case compactorv1.Role_ROLE_USER, compactorv1.Role_ROLE_ASSISTANT:
			lay.turnStarts = append(lay.turnStarts, int32(c))
		}
	}
	sc.open, sc.approvals, sc.turnStarts, sc.results = calls, approvals, lay.turnStarts, lay.results
	return lay
}

package engine

// The user's requests a compaction keeps verbatim after its summary (DISPOSITION_KEEP_REQUEST)
// rather than folding them into it: the newest request always (the user's own newest text is
// never cut), then the task (the first request), then the others newest first, within
// Policy.keep_user_messages_tokens. Requests left out go into the summary.

// keptRequests selects, among reqs (the active requests, oldest first), those before message
// cut that the compaction keeps verbatim: the newest request of the conversation when it is
// before the cut, then, when optional, the task and the others newest first while their
// tokens stay within budget (budget < 0: none of them). It calls keep for each (in no
// particular order) and returns their tokens.
func keptRequests(reqs []int32, cut int, tokens []int64, budget int64, optional bool, keep func(i int)) int64 {
	m := 0
	for m < len(reqs) && int(reqs[m]) < cut {
		m++
	}
	if m == 0 {
		return 0
	}
	var used int64
	add := func(i int) {
		used += tokens[i]
		if keep != nil {
			keep(i)
		}
	}
	newest := -1
	if m == len(reqs) { // the newest request of the conversation is before the cut
		newest = m - 1
		add(int(reqs[newest]))
	}
	if !optional || budget < 0 {
		return used
	}
	try := func(k int) {
		if k != newest && used+tokens[reqs[k]] <= budget {
			add(int(reqs[k]))
		}
	}
	try(0)
	for k := m - 1; k >= 1; k-- {
		try(k)
	}
	return used
}

package engine

import compactorv1 "github.com/compactord/compactord/api/compactor/v1"

// Pruning to the target: when pruning alone reaches the target, a plan prunes the old tool
// outputs oldest first only until the conversation is at the target (and pruning frees
// clearAtLeast, so that the cache it rewrites pays back), not every prunable output: the
// newer ones, which the agent read last and is likelier to use again, stay whole. The output
// that crosses the target is cut to its head and tail rather than pruned when that is enough
// (in its message, only what pruning would prune is cut: never a newest result keep_recent
// protects, nor an excluded tool's output). An output a later identical call superseded is
// pruned wherever it is: that call stands for it. Since the oldest go first, the rewrite
// starts no later than pruning them all would start it, and clearAtLeast, reckoned from
// there, still pays it back. Sparing is by message; with prune.clear_inputs, whose inputs are
// in other messages than their outputs, every prunable output is pruned.

// prunedSaved is what pruning saves in message i in shape sh.
func (dc *deciding) prunedSaved(sh *shape, i int) int64 {
	if !sh.pruned || dc.pr.saved == nil || sh.partial && i >= sh.spare && !dc.superseded[i] {
		return 0
	}
	return dc.pr.saved[i]
}

// prunedTotal is what pruning saves in shape sh.
func (dc *deciding) prunedTotal(sh *shape) int64 {
	if !sh.pruned {
		return 0
	}
	if !sh.partial {
		return dc.pr.total
	}
	var n int64
	for i := range dc.pr.saved {
		n += dc.prunedSaved(sh, i)
	}
	return n
}

// markSuperseded sets dc.superseded: the messages in which every part pruning replaces is an
// output a newer identical call superseded (or its call's input), and returns what pruning
// saves in them.
func (dc *deciding) markSuperseded() int64 {
	dc.superseded = make([]bool, len(dc.pr.saved))
	// dc.pr.parts is in message order: a message's parts are consecutive.
	var n int64
	for k := 0; k < len(dc.pr.parts); {
		m, all := dc.pr.parts[k].Message, true
		for ; k < len(dc.pr.parts) && dc.pr.parts[k].Message == m; k++ {
			all = all && dc.pr.parts[k].Duplicate
		}
		if dc.superseded[m] = all; all {
			n += dc.pr.saved[m]
		}
	}
	return n
}

// prunedOutputsIn counts the tool outputs shape sh prunes (their inputs not counted), and
// among them the superseded ones it prunes although newer than those it spares.
func (dc *deciding) prunedOutputsIn(sh *shape) (n, newer int) {
	for _, p := range dc.pr.parts {
		if !p.Input && dc.prunedSaved(sh, p.Message) > 0 {
			n++
			if sh.partial && p.Message >= sh.spare {
				newer++
			}
		}
	}
	return n, newer
}

// pruneToTarget returns the prune-only shape that reaches the target freeing at least
// clearAtLeast: the oldest prunable outputs pruned (and every superseded one), the one that
// crosses the target cut instead when cutting it frees enough, the newer ones kept (see the
// file's comment). It is called when pruning every prunable output reaches the target.
func (dc *deciding) pruneToTarget() shape {
	sz := dc.sz
	sh := shape{action: compactorv1.Action_ACTION_PRUNE, pruned: true, enough: true, head: sz.head}
	if dc.pol.clearInputs {
		// A call's input and its output are in different messages: sparing by message
		// could clear an input whose output stays. Every prunable output goes.
		sh.after = sz.before - dc.pr.total
		sh.tail = sh.after - sh.head - sz.summary
		return sh
	}
	need := max(sz.before-dc.pol.target, dc.clearAtLeast())
	// Superseded outputs are pruned wherever they are: the newer identical call stands for
	// them, and the rewrite starts no later for it.
	freed := dc.markSuperseded()
	cross := -1
	for i, s := range dc.pr.saved {
		if s <= 0 || dc.superseded[i] {
			continue
		}
		if freed+s >= need {
			cross = i
			break
		}
		freed += s
	}
	if cross < 0 { // only every output frees enough
		sh.after = sz.before - dc.pr.total
		sh.tail = sh.after - sh.head - sz.summary
		return sh
	}
	// The outputs before cross pruned; cross cut to land on the target, if that does.
	sh.spare, sh.partial = cross, true
	sh.after = sz.before - freed
	sh.tail = sh.after - sh.head - sz.summary
	dc.cutOutputs(&sh, cross, cross+1, sz.before-need)
	if sh.after > sz.before-need {
		// Cutting does not free enough (its head and tail are more than the target leaves):
		// cross is pruned too.
		sh.cuts, sh.cut, sh.spare = nil, 0, cross+1
		freed += dc.pr.saved[cross]
		sh.after = sz.before - freed
		sh.tail = sh.after - sh.head - sz.summary
	}
	if sh.spare >= len(dc.pr.saved) || freed == dc.pr.total {
		sh.spare, sh.partial = 0, false
	}
	return sh
}

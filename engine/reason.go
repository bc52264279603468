package engine

import "strconv"

// reason is a plan's human-readable reason as it is built: Decide appends to a buffer on
// its stack and allocates only the final string. Numbers read as fmt's %d prints them.
type reason []byte

// s appends text.
func (r reason) s(text string) reason { return append(r, text...) }

// d appends n in decimal.
func (r reason) d(n int64) reason { return strconv.AppendInt(r, n, 10) }

// start appends the numbers that decide whether to act: "total T > trigger X (R × usable U
// = window W − reserve V)", with "forced: " first when forced.
func (r reason) start(pol *policy, total int64, force bool) reason {
	if force {
		r = r.s("forced: ")
	}
	r = r.s("total ").d(total)
	if total > pol.trigger {
		r = r.s(" > trigger ")
	} else {
		r = r.s(" ≤ trigger ")
	}
	r = r.d(pol.trigger)
	if pol.triggerRatio > 0 {
		r = reason(strconv.AppendFloat(r.s(" ("), pol.triggerRatio, 'g', -1, 64)).s(" × usable ").d(pol.usable)
	} else {
		r = r.s(" (trigger_tokens; usable ").d(pol.usable)
	}
	if pol.window > 0 {
		return r.s(" = window ").d(pol.window).s(" − reserve ").d(pol.reserve).s(")")
	}
	return r.s(", no window)")
}

// onlyTurns appends why nothing can be summarized: too few active turns.
func (r reason) onlyTurns(turns int, pol *policy) reason {
	return r.s("only ").d(int64(turns)).s(" active turns, keep_recent_turns ").d(int64(pol.keepTurns)).s(": nothing to summarize")
}

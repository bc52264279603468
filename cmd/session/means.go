package main

// identBuckets is how many compaction indexes the identifier figure reports apart: the
// first … the fourth, then the fifth and later together.
const identBuckets = 5

// stat is a running mean, minimum and maximum.
type stat struct {
	sum, min, max float64
	n             int
}

func (s *stat) add(x float64) {
	if s.n == 0 || x < s.min {
		s.min = x
	}
	if s.n == 0 || x > s.max {
		s.max = x
	}
	s.sum += x
	s.n++
}

// mean is the mean of what was added (0 for nothing).
func (s stat) mean() float64 {
	if s.n == 0 {
		return 0
	}
	return s.sum / float64(s.n)
}

// means are the figures of one window's replays: the end figures and costs over the
// sessions that compacted, the per-compaction figures over their compactions, the errors
// over every session.
type means struct {
	sessions, compacted, compactions int
	requests                         stat // the lines of the user's requests present at the end
	task                             stat // of the SWE-agent and mini-swe-agent sessions, their task's
	claudeMD                         stat // the lines of the CLAUDE.md block present at the end
	// ident is, over the compactions with any, the share of identifiers the agent wrote after
	// the compaction (and held before it) present right after; identAt by compaction index.
	ident   stat
	identAt [identBuckets]stat
	// consecutive compactions ran on the turn right after another; allowed of them because
	// that turn alone grew the conversation by more than trigger − target.
	consecutive, allowed int
	// size is the tokens right after each compaction (a Plan of them) over the usable window;
	// planSize the same by the Compact response's plan's tokens_after.
	size, planSize stat
	// Compactions whose result (a Plan of it) is above the plan's target, and its trigger.
	aboveTarget, aboveTrigger int
	cost                      stat // actual / ideal input cost at the cache prices
	// failures are failed calls (irreducible of them CONTEXT_IRREDUCIBLE); declined the
	// Compact calls that answered compacted=false.
	failures, irreducible, declined int
}

// means computes the means of one window's results.
func (rep report) means(results []result) means {
	var m means
	for _, r := range results {
		if r.s.err != nil {
			continue
		}
		m.sessions++
		m.failures += len(r.tr.failures)
		m.declined += len(r.tr.declined)
		for _, f := range r.tr.failures {
			if f.irreducible {
				m.irreducible++
			}
		}
		if !r.compacted() {
			continue
		}
		m.compacted++
		m.requests.add(r.fig.requests)
		if r.s.sweTask() && r.fig.task >= 0 {
			m.task.add(r.fig.task)
		}
		if r.fig.claudeMD >= 0 {
			m.claudeMD.add(r.fig.claudeMD)
		}
		m.cost.add(r.fig.cost())
		for _, c := range r.tr.compactions {
			m.addCompaction(c, r.tr.requests)
		}
	}
	return m
}

func (m *means) addCompaction(c compaction, reqs []request) {
	m.compactions++
	if c.needed > 0 {
		share := float64(c.kept) / float64(c.needed)
		m.ident.add(share)
		m.identAt[min(c.n, identBuckets)-1].add(share)
	}
	if c.consecutive(reqs) {
		m.consecutive++
		if c.allowed() {
			m.allowed++
		}
	}
	if c.usable > 0 {
		m.size.add(float64(c.after) / float64(c.usable))
		m.planSize.add(float64(c.planAfter) / float64(c.usable))
	}
	if c.after > c.target {
		m.aboveTarget++
	}
	if c.after > c.trigger {
		m.aboveTrigger++
	}
}

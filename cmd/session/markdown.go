package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/compactord/compactord/fidelity"
	"github.com/compactord/compactord/internal/measure"
)

// writeMarkdown writes the report: how it was made, the means per window (and warm against
// cold), then each session, each compaction and each error.
func writeMarkdown(w io.Writer, rep report) {
	o := rep.opt
	fmt.Fprintf(w, "# Session replay on %s\n\n", rep.corpus)
	fmt.Fprintf(w, "Written by `%s` (`make session`) on %s, %s, %d cores; the run took %s.\n\n",
		rep.command(), rep.env.date, rep.env.machine, rep.env.cores, rep.env.elapsed.Round(time.Second))
	writeMethod(w, rep)

	cols := make([]string, len(o.windows))
	for i, r := range o.windows {
		cols[i] = pct(r)
	}
	ms := make([]means, len(o.windows))
	for i := range o.windows {
		ms[i] = rep.means(rep.cold[i])
	}
	fmt.Fprintf(w, "## Means over the sessions that compacted\n\n")
	writeMeans(w, "window", cols, ms)

	if rep.warm != nil {
		writeWarm(w, rep, cols, ms)
	}
	for i := range o.windows {
		fmt.Fprintf(w, "\n## Sessions at %s\n\n", cols[i])
		writeSessions(w, rep.cold[i], rep.fake)
	}
	for i := range o.windows {
		fmt.Fprintf(w, "\n## Compactions at %s\n\n", cols[i])
		writeCompactions(w, rep.cold[i])
	}
	writeErrors(w, rep, cols)
}

// command is the command line that makes the report.
func (rep report) command() string {
	o := rep.opt
	var b strings.Builder
	b.WriteString("go run ./cmd/session")
	if o.corpus != "" {
		fmt.Fprintf(&b, " -corpus %s", o.corpus)
	}
	ws := make([]string, len(o.windows))
	for i, r := range o.windows {
		ws[i] = fmt.Sprint(r)
	}
	fmt.Fprintf(&b, " -windows %s", strings.Join(ws, ","))
	if o.headroom > 0 {
		fmt.Fprintf(&b, " -headroom %d", o.headroom)
	}
	fmt.Fprintf(&b, " -summarizer %s", o.summarizer)
	if o.warm {
		b.WriteString(" -warm")
	}
	return b.String()
}

// headroomField names the policy's headroom_turns when the run set it.
func headroomField(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("`headroom_turns` %d, ", n)
}

func writeMethod(w io.Writer, rep report) {
	fmt.Fprintf(w, "Each conversation is replayed as a host runs it, in process (`service.Server`, memory cache, summarizer `%s`, one tenant): the host holds what it persisted, at first nothing; before each assistant message it calls Plan at `context_window` = max(%d, ratio × N) (N: the conversation's tokens; %severy other policy field at its default), which is one model request; when the plan acts it calls Compact (not forced, the same policy) and persists what it returns; then it appends the message. ", rep.opt.summarizer, minWindow, headroomField(rep.opt.headroom))
	fmt.Fprintf(w, "Claude Code conversations (Anthropic bodies named `claudecode-*`/`claudetrace-*`, or whose first user message opens with a CLAUDE.md `<system-reminder>`) carry the CLAUDE.md block of `%s` as the first text part of their first user message, unless they carry their own. ", measure.ClaudeTrace)
	fmt.Fprintf(w, "**Requests**: for each user request of the conversation (`engine.Requests`; the task included, without the CLAUDE.md block), the share of its lines of %d+ characters (whitespace-normalised) found verbatim in what the model is sent at the end (`engine.Sent`, summaries included); mean over requests, then sessions. **CLAUDE.md**: the same for the block's lines. ", fidelity.MinLineChars)
	fmt.Fprintf(w, "**Identifiers**: for a compaction before the assistant message at turn t, the identifiers (`fidelity.Needed`) the conversation held before it that the agent writes from t on, and the share of them it holds right after. **Consecutive**: a compaction on the model request right after one that compacted; *allowed* when the conversation grew by more than trigger − target in that one turn (the target of the compaction before, the headroom it left; none when it landed above its target, as its reason said). **Size**: the tokens right after a compaction (a Plan of them) over the usable window. ")
	fmt.Fprintf(w, "**Cache cost**: request i of L_i tokens whose first P_i tokens are messages identical (proto.Equal) to the previous request's leading ones costs %v × P_i + %v × (L_i − P_i) (Anthropic: cache read %v×, cache write %v× the input price); ideally %v × min(L_i, L_i−1) + %v × max(0, L_i − L_i−1); the first request %v × L_0 in both; the figure is Σ actual / Σ ideal per session. ",
		cacheReadPrice, cacheWritePrice, cacheReadPrice, cacheWritePrice, cacheReadPrice, cacheWritePrice, cacheWritePrice)
	if rep.warm != nil {
		fmt.Fprintf(w, "**Warm**: each session again on a server whose cache was first filled, under the same tenant, by forced compactions of the conversation cut before the assistant message nearest %s of its messages at max(%d, %v × N), each also with `summary_max_tokens` %d and with instructions, then the same replay at max(%d, %v × N). ",
			sharesList(fillPoints), minWindow, fillForcedRatio, fillSmallRoom, minWindow, fillReplayRatio)
	}
	fmt.Fprintf(w, "Method and goals: docs/FIDELITY.md, \"Sessions\".\n\n")
}

// writeMeans writes the means table, one column per entry of ms.
func writeMeans(w io.Writer, head string, cols []string, ms []means) {
	fmt.Fprintf(w, "| %s | %s |\n|---|%s\n", head, strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	row := func(name string, f func(m means) string) {
		fmt.Fprintf(w, "| %s |", name)
		for _, m := range ms {
			fmt.Fprintf(w, " %s |", f(m))
		}
		fmt.Fprintln(w)
	}
	row("sessions that compacted (of all replayed)", func(m means) string { return fmt.Sprintf("%d of %d", m.compacted, m.sessions) })
	row("compactions", func(m means) string { return fmt.Sprint(m.compactions) })
	row("lines of the user's requests (the task included) present verbatim at the end", func(m means) string { return num(m.requests.mean()) })
	row("… of SWE-agent and mini-swe-agent tasks: mean (min–max, sessions)", func(m means) string { return spread(m.task) })
	row("lines of the CLAUDE.md block present at the end: mean (min–max, sessions)", func(m means) string { return spread(m.claudeMD) })
	row("identifiers the agent wrote after a compaction (and held before it) present right after it", func(m means) string {
		return fmt.Sprintf("%s (%d compactions)", num(m.ident.mean()), m.ident.n)
	})
	row("… at the 1st / 2nd / 3rd / 4th / 5th and later compaction", func(m means) string {
		parts := make([]string, identBuckets)
		for k, s := range m.identAt {
			parts[k] = "–"
			if s.n > 0 {
				parts[k] = fmt.Sprintf("%.2f", s.mean())
			}
		}
		return strings.Join(parts, " / ")
	})
	row("compactions on the turn right after another (allowed: that turn added more than trigger − the previous target)", func(m means) string {
		return fmt.Sprintf("%d (%d allowed)", m.consecutive, m.allowed)
	})
	row("size right after a compaction, share of the usable window: mean, max", func(m means) string {
		return fmt.Sprintf("%.2f, %.2f", m.size.mean(), m.size.max)
	})
	row("… by the Compact response's plan (tokens_after): mean, max", func(m means) string {
		return fmt.Sprintf("%.2f, %.2f", m.planSize.mean(), m.planSize.max)
	})
	row("compactions ending above the target / above the trigger", func(m means) string {
		return fmt.Sprintf("%d / %d", m.aboveTarget, m.aboveTrigger)
	})
	row("input cost at Anthropic's cache prices against each request extending the previous: mean (max)", func(m means) string {
		return fmt.Sprintf("%.2f× (%.2f×)", m.cost.mean(), m.cost.max)
	})
	row("failed calls, all sessions (irreducible); Compact answering compacted=false", func(m means) string {
		return fmt.Sprintf("%d (%d); %d", m.failures, m.irreducible, m.declined)
	})
}

// writeWarm writes the warm replays against the cold ones: the means, then each session.
func writeWarm(w io.Writer, rep report, cols []string, cold []means) {
	fmt.Fprintf(w, "\n## Warm cache against cold\n\n")
	var wcols []string
	var ms []means
	for i := range rep.opt.windows {
		wcols = append(wcols, cols[i]+" cold", cols[i]+" warm")
		ms = append(ms, cold[i], rep.means(rep.warm[i]))
	}
	writeMeans(w, "window", wcols, ms)
	fmt.Fprintf(w, "\nPer session (cold → warm, and the difference); the fill's calls and how many failed.\n\n")
	fmt.Fprintf(w, "| session | window | requests | task | CLAUDE.md | identifiers | cache cost | compactions | fill calls (failed) |\n|---|---|---|---|---|---|---|---|---|\n")
	for i := range rep.opt.windows {
		for k, c := range rep.cold[i] {
			x := rep.warm[i][k]
			if c.s.err != nil {
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %d → %d | %d (%d) |\n", c.s.name, cols[i],
				delta(c.fig.requests, x.fig.requests), delta(c.fig.task, x.fig.task), delta(c.fig.claudeMD, x.fig.claudeMD),
				delta(identMean(c.tr), identMean(x.tr)), delta(c.fig.cost(), x.fig.cost()),
				len(c.tr.compactions), len(x.tr.compactions), x.fillCalls, x.fillFailed)
		}
	}
}

// identMean is the mean identifier share of a replay's compactions (-1: none had any).
func identMean(tr trace) float64 {
	var s stat
	for _, c := range tr.compactions {
		if c.needed > 0 {
			s.add(float64(c.kept) / float64(c.needed))
		}
	}
	if s.n == 0 {
		return -1
	}
	return s.mean()
}

// writeSessions writes a row per session; with billed (a summarizer against the fake
// provider), the summary input each session's calls billed (summaryBilled) too.
func writeSessions(w io.Writer, results []result, billed bool) {
	head, rule, empty := "", "", ""
	if billed {
		head, rule, empty = " summary input billed (calls) |", "---|", " |"
	}
	fmt.Fprintf(w, "| session | agent | msgs | N | window | requests (n) | task | CLAUDE.md | compactions | identifiers | consecutive (allowed) | size after: mean, max | above target / trigger | cache cost | failed |%s\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|%s\n", head, rule)
	for _, r := range results {
		s := r.s
		if s.err != nil {
			fmt.Fprintf(w, "| %s | %s | | | | | | | | | | | | | not replayed: %s |%s\n", s.name, s.kind, cell(s.err.Error()), empty)
			continue
		}
		bill := ""
		if billed {
			b := summaryBilled([]result{r})
			bill = fmt.Sprintf(" %.0f (%d) |", b.billed, b.calls)
		}
		var m means
		for _, c := range r.tr.compactions {
			m.addCompaction(c, r.tr.requests)
		}
		size := "–"
		if m.size.n > 0 {
			size = fmt.Sprintf("%.2f, %.2f", m.size.mean(), m.size.max)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %s (%d) | %s | %s | %d | %s | %d (%d) | %s | %d / %d | %.2f× | %d |%s\n",
			s.name, s.kind, len(s.msgs), s.tokens, r.tr.window, num(r.fig.requests), len(s.requests), opt(r.fig.task), opt(r.fig.claudeMD),
			len(r.tr.compactions), opt(identMean(r.tr)), m.consecutive, m.allowed, size, m.aboveTarget, m.aboveTrigger, r.fig.cost(), len(r.tr.failures), bill)
	}
}

func writeCompactions(w io.Writer, results []result) {
	fmt.Fprintf(w, "Turn: the index of the assistant message the compaction came before. Tokens: before (the host's plan), after (a Plan of what Compact returned) and the Compact response's tokens_after; target, trigger and usable window from the host's plan. Consecutive: `yes` on the request right after another compaction, `allowed` when that turn added more than trigger − the previous compaction's target (its growth given). Requests and CLAUDE.md: what the conversation holds right after the compaction of the requests made before it and of the block.\n\n")
	fmt.Fprintf(w, "| session | # | turn | action | before | after | tokens_after | target | trigger | usable | consecutive | identifiers kept / needed | requests | CLAUDE.md | cache | plan's reason |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		for _, c := range r.tr.compactions {
			consec := ""
			if c.consecutive(r.tr.requests) {
				consec = fmt.Sprintf("yes (+%d)", c.added)
				if c.allowed() {
					consec = fmt.Sprintf("allowed (+%d)", c.added)
				}
			}
			fmt.Fprintf(w, "| %s | %d | %d | %s | %d | %d | %d | %d | %d | %d | %s | %d / %d | %s | %s | %s | %s |\n", r.s.name, c.n, c.turn,
				strings.TrimPrefix(c.action, "ACTION_"), c.before, c.after, c.planAfter, c.target, c.trigger, c.usable, consec,
				c.kept, c.needed, opt(c.requests), opt(c.claudeMD), strings.TrimPrefix(c.cache, "CACHE_STATUS_"), cell(c.reason))
		}
	}
}

func writeErrors(w io.Writer, rep report, cols []string) {
	fmt.Fprintf(w, "\n## Failed calls and declined compactions\n\n")
	n := 0
	each := func(mode string, results [][]result) {
		for i, rs := range results {
			for _, r := range rs {
				for _, f := range r.tr.failures {
					if n == 0 {
						fmt.Fprintf(w, "| window | replay | session | turn | call | irreducible | error |\n|---|---|---|---|---|---|---|\n")
					}
					n++
					fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %v | %s |\n", cols[i], mode, r.s.name, f.turn, f.call, f.irreducible, cell(f.err))
				}
			}
		}
	}
	each("cold", rep.cold)
	if rep.warm != nil {
		each("warm", rep.warm)
	}
	if n == 0 {
		fmt.Fprintf(w, "No call failed.\n")
	}
	d := 0
	for i, rs := range rep.cold {
		for _, r := range rs {
			for _, x := range r.tr.declined {
				if d == 0 {
					fmt.Fprintf(w, "\nCompact answered compacted=false (cold):\n\n")
				}
				d++
				fmt.Fprintf(w, "- %s, %s, turn %d: %s\n", cols[i], r.s.name, x.turn, oneLine(x.reason))
			}
		}
	}
}

func pct(r float64) string { return fmt.Sprintf("%.0f%%", 100*r) }

func sharesList(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = pct(x)
	}
	return strings.Join(s, ", ")
}

func num(x float64) string { return fmt.Sprintf("%.3f", x) }

// opt is x, or "–" when it is negative (not applicable).
func opt(x float64) string {
	if x < 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", x)
}

// spread is a stat's mean (min–max, n), or "–" when it is empty.
func spread(s stat) string {
	if s.n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f (%.2f–%.2f, %d)", s.mean(), s.min, s.max, s.n)
}

// delta is "a → b (b − a)", or "–" when neither applies.
func delta(a, b float64) string {
	if a < 0 && b < 0 {
		return "–"
	}
	return fmt.Sprintf("%s → %s (%+.2f)", opt(a), opt(b), b-a)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cell is s on one line, safe in a table cell.
func cell(s string) string { return strings.ReplaceAll(oneLine(s), "|", `\|`) }

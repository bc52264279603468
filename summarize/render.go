package summarize

import (
	"fmt"
	"sort"
	"strings"

	"github.com/compactord/compactord/engine"
)

// Choosing the items within the budget and writing them: the prioritized items first (most
// negative priority first, newest first within one), cut to fit when they are the ones that
// must not vanish; then, while anything fits, the item worth the most per token, where an
// item is worth its base (build.go), scaled by how recent it is, plus worthCarried for each
// value the agent carried on that it shows and no chosen item shows yet; then, with room
// left, the longer form of the items chosen, the newest first: a longer excerpt of a late
// output shows values no later message of the range could have used yet, which the next
// turns may (the items' worth does not see them). Sections are written
// in order, their items oldest first, each ending with its citation; the legend of citations
// comes first.

// render chooses items within opt.MaxTokens and writes them.
func (x *extractor) render(opt ExtractiveOptions) string {
	budget := int(opt.MaxTokens)
	if c := opt.Count(engine.CitationLegend + "\n\n"); c*legendShare <= budget {
		budget -= c
		x.legend = true
	}
	headerCost := map[string]int{}
	for _, s := range sections {
		headerCost[s] = opt.Count("## "+s+"\n") + 1 // + the blank line between sections
	}
	chosen := make([]bool, len(x.items))
	var order []int // the chosen items, in the order chosen
	opened := map[string]bool{}
	covered := map[string]bool{}
	used := 0
	cost := func(i int) int {
		c := opt.Count(x.items[i].text + x.items[i].cite + "\n")
		if !opened[x.items[i].section] {
			c += headerCost[x.items[i].section]
		}
		return c
	}
	take := func(i, c int) {
		chosen[i], opened[x.items[i].section] = true, true
		used += c
		order = append(order, i)
		for _, w := range x.items[i].carried {
			covered[w] = true
		}
	}

	// 1. The prioritized items.
	var prio []int
	for i, it := range x.items {
		if it.prio < prioChosen {
			prio = append(prio, i)
		}
	}
	sort.SliceStable(prio, func(a, b int) bool {
		ia, ib := x.items[prio[a]], x.items[prio[b]]
		if ia.prio != ib.prio {
			return ia.prio < ib.prio
		}
		return ia.seq > ib.seq
	})
	for _, i := range prio {
		if c := cost(i); used+c <= budget {
			take(i, c)
			continue
		}
		// The earlier summary, the first and latest requests and the last intent must not
		// vanish: keep what fits of them.
		switch x.items[i].prio {
		case prioRequestEnds, prioIntent, prioEarlier, prioLastAction:
		default:
			continue
		}
		h := 0
		if !opened[x.items[i].section] {
			h = headerCost[x.items[i].section]
		}
		// Cut with its citation, else, in a room too small for both, without it: the words
		// matter more than where they came from.
		for _, cite := range []string{x.items[i].cite, ""} {
			if chosen[i] {
				break
			}
			for room := budget - used - h - 12; room >= 8; room = room * 3 / 4 {
				text := engine.Truncate(x.items[i].text, room*2) // ~2 bytes per token is a safe bound for most text
				if x.items[i].section == secRequests {
					text = wholeLines(x.items[i].text, room*2) // a request is never cut mid-line
				}
				if c := opt.Count(text+cite+"\n") + h; text != "" && used+c <= budget {
					x.items[i].text, x.items[i].cite = text, cite
					take(i, c)
					break
				}
			}
		}
	}

	// 2. The rest, by value per token.
	var rest []int
	for i, it := range x.items {
		if it.prio >= prioChosen {
			rest = append(rest, i)
		}
	}
	// Every item's cost, a prioritized one's as step 1 left it (cut to fit): a longer form
	// replaces it at the difference.
	costs := make([]int, len(x.items))
	for i := range x.items {
		costs[i] = opt.Count(x.items[i].text + x.items[i].cite + "\n")
	}
	inGroup := map[int]int{} // group → its chosen item
	for _, i := range order {
		if g := x.items[i].group; g != 0 {
			inGroup[g] = i
		}
	}
	// choose takes item i in place of prev, its group's item chosen before (−1: none).
	choose := func(i, prev int) {
		c := costs[i]
		if prev >= 0 {
			chosen[prev] = false
			used -= costs[prev]
		} else if !opened[x.items[i].section] {
			c += headerCost[x.items[i].section]
		}
		take(i, c)
		if g := x.items[i].group; g != 0 {
			inGroup[g] = i
		}
	}
	for {
		best, bestPrev, bestValue := -1, -1, 0.0
		for _, i := range rest {
			if chosen[i] {
				continue
			}
			it := &x.items[i]
			c, prev := costs[i], -1
			if j, ok := inGroup[it.group]; ok && it.group != 0 {
				if costs[i] <= costs[j] {
					continue
				}
				c, prev = costs[i]-costs[j], j
			} else if !opened[it.section] {
				c += headerCost[it.section]
			}
			if used+c > budget {
				continue
			}
			v := it.base * x.recency(it.seq)
			n := uncovered(it.carried, covered)
			if prev >= 0 {
				v -= x.items[prev].base * x.recency(x.items[prev].seq)
				n -= uncovered(x.items[prev].carried, covered)
			}
			v += worthCarried * float64(n)
			v /= float64(max(c, 1))
			if v > bestValue || v == bestValue && best >= 0 && it.seq > x.items[best].seq {
				best, bestPrev, bestValue = i, prev, v
			}
		}
		if best < 0 || bestValue <= 0 {
			break
		}
		choose(best, bestPrev)
	}

	// 3. Room left: the longer form of the newest items first (what the latest outputs said,
	// which no later message has used yet).
	for {
		best, bestPrev := -1, -1
		for _, i := range rest {
			it := &x.items[i]
			j, ok := inGroup[it.group]
			if chosen[i] || !ok || it.group == 0 || costs[i] <= costs[j] || used+costs[i]-costs[j] > budget {
				continue
			}
			if best < 0 || it.seq > x.items[best].seq || it.seq == x.items[best].seq && costs[i] < costs[best] {
				best, bestPrev = i, j
			}
		}
		if best < 0 {
			break
		}
		choose(best, bestPrev)
	}

	for {
		out := x.write(chosen)
		if opt.Count(out) <= int(opt.MaxTokens) || len(order) == 0 {
			return out
		}
		// Token counts are not exactly additive: drop the item chosen last.
		for len(order) > 0 && !chosen[order[len(order)-1]] {
			order = order[:len(order)-1]
		}
		if len(order) > 0 {
			chosen[order[len(order)-1]] = false
			order = order[:len(order)-1]
		}
	}
}

// legendShare: the legend of citations is written when it takes at most 1/legendShare of
// the budget; a smaller summary spends its room on what happened (its citations still parse).
const legendShare = 8

// uncovered is how many of carried no chosen item shows yet (not in covered), at most
// carriedCap: what an item adds beyond the items chosen before it.
func uncovered(carried []string, covered map[string]bool) int {
	n := 0
	for _, w := range carried {
		if !covered[w] {
			n++
		}
	}
	return min(n, carriedCap)
}

// recency scales the worth of an item at seq: from recencyFloor at the range's start to 1 at
// its end.
func (x *extractor) recency(seq int) float64 {
	if x.seq == 0 {
		return 1
	}
	return recencyFloor + (1-recencyFloor)*float64(seq)/float64(x.seq)
}

// write writes the chosen items, section by section, oldest first, after the legend of
// citations when one of them cites.
func (x *extractor) write(chosen []bool) string {
	var b strings.Builder
	for i, it := range x.items {
		if x.legend && chosen[i] && len(engine.ParseCitations(it.text+it.cite)) > 0 {
			b.WriteString(engine.CitationLegend)
			b.WriteString("\n")
			break
		}
	}
	for _, s := range sections {
		var idx []int
		for i, it := range x.items {
			if chosen[i] && it.section == s {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		sort.SliceStable(idx, func(a, c int) bool { return x.items[idx[a]].seq < x.items[idx[c]].seq })
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "## %s\n", s)
		for _, i := range idx {
			b.WriteString(x.items[i].text)
			b.WriteString(x.items[i].cite)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// wholeLines returns text within max bytes cut between its lines, never inside one: the
// lines of its head (up to two thirds of max) and of its tail, with a line saying how many
// were left out between them; "" when its first line alone is longer than max.
func wholeLines(text string, max int) string {
	if len(text) <= max {
		return text
	}
	lines := strings.Split(text, "\n")
	const marker = "  … [%d lines omitted] …"
	room := max - len(marker) - 8
	head, n := 0, 0
	for head < len(lines) && n+len(lines[head])+1 <= room*2/3 {
		n += len(lines[head]) + 1
		head++
	}
	if head == 0 {
		return ""
	}
	tail := len(lines)
	for tail > head && n+len(lines[tail-1])+1 <= room {
		n += len(lines[tail-1]) + 1
		tail--
	}
	if tail == head {
		return strings.Join(lines, "\n")
	}
	out := append(lines[:head:head], fmt.Sprintf(marker, tail-head))
	return strings.Join(append(out, lines[tail:]...), "\n")
}

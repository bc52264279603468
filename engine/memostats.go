package engine

// MemoStats reports what c's memo holds: its entries and the bytes charged for them (the
// estimate NewCounter's budget bounds), summed over all its parts. It is safe for concurrent
// use and locks each shard only briefly, so it can back a metrics gauge.
func (c *Counter) MemoStats() (entries int, bytes int64) {
	for _, s := range []func() (int, int64){c.counts.stats, c.convs.stats, c.plans.stats, c.chain.stats, c.prefixes.stats} {
		n, b := s()
		entries += n
		bytes += b
	}
	return entries, bytes
}

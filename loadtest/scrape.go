package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// heapState is what a replica's /metrics says about its memory: the live heap (marked by
// the last GC) and its bounded in-memory stores (summary cache and token memo), in bytes.
type heapState struct {
	Live, Stores, StoresMax int64
}

// scrapeHeap reads the memory series of the compactord /metrics endpoint at addr.
func scrapeHeap(ctx context.Context, addr string) (heapState, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return heapState{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return heapState{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return heapState{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseHeap(bufio.NewScanner(resp.Body))
}

// parseHeap reads heapState from the Prometheus text format: compactord_heap_live_bytes, and the
// sums of compactord_store_bytes and compactord_store_max_bytes over their stores.
func parseHeap(sc *bufio.Scanner) (heapState, error) {
	var h heapState
	live := false
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		metric, _, _ := strings.Cut(name, "{")
		var dst *int64
		switch metric {
		case "compactord_heap_live_bytes":
			dst, live = &h.Live, true
		case "compactord_store_bytes":
			dst = &h.Stores
		case "compactord_store_max_bytes":
			dst = &h.StoresMax
		default:
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			return heapState{}, fmt.Errorf("metrics line %q: %w", line, err)
		}
		*dst += int64(v)
	}
	if err := sc.Err(); err != nil {
		return heapState{}, err
	}
	if !live {
		return heapState{}, fmt.Errorf("no compactord_heap_live_bytes in /metrics")
	}
	return h, nil
}

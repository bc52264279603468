package main

import (
	"bufio"
	"strings"
	"testing"
)

func TestParseHeap(t *testing.T) {
	in := `# HELP compactord_heap_live_bytes Heap memory occupied by live objects that were marked by the previous GC.
# TYPE compactord_heap_live_bytes gauge
compactord_heap_live_bytes 1.7714008e+07
compactord_heap_goal_bytes 3.5e+07
compactord_store_bytes{store="summary-cache"} 2048
compactord_store_bytes{store="token-memo"} 4096
compactord_store_entries{store="token-memo"} 7
compactord_store_max_bytes{store="summary-cache"} 2.097152e+06
compactord_store_max_bytes{store="token-memo"} 4.194304e+06
`
	got, err := parseHeap(bufio.NewScanner(strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	if want := (heapState{Live: 17714008, Stores: 6144, StoresMax: 6 << 20}); got != want {
		t.Errorf("parseHeap = %+v, want %+v", got, want)
	}
	if _, err := parseHeap(bufio.NewScanner(strings.NewReader("compactord_heap_goal_bytes 1\n"))); err == nil {
		t.Error("parseHeap without the live heap: no error")
	}
}

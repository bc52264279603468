package main

import (
	"testing"
	"time"
)

// A run that is over before the ticker's goroutine sent its value must not panic (ghz's
// ConstWorkerTicker does: "send on closed channel"), and the value is sent when it is not.
func TestConstWorkersFinishBeforeRun(t *testing.T) {
	w := newConstWorkers(4)
	w.Finish()
	w.Run() // must neither panic nor block
	if _, ok := <-w.Ticker(); ok {
		t.Error("a value after Finish")
	}
	w.Finish() // harmless twice

	w = newConstWorkers(4)
	got := make(chan int, 1)
	go func() {
		for tv := range w.Ticker() {
			got <- tv.Delta
			if tv.Done {
				return
			}
		}
	}()
	w.Run()
	select {
	case d := <-got:
		if d != 4 {
			t.Errorf("delta %d, want 4", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run sent nothing")
	}
	w.Finish()
}

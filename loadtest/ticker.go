package main

import (
	"sync"

	"github.com/bojand/ghz/load"
)

// constWorkers is ghz's constant worker ticker without its race. ghz starts the ticker's Run
// in a goroutine and calls Finish (which closes the channel) when the run's duration is up;
// when a short run ends before that goroutine has sent its one value (a loaded machine, a
// slice of a few hundred milliseconds), load.ConstWorkerTicker sends on the closed channel
// and the whole process panics. Here Run and Finish exclude each other, and Run sends
// nothing once Finish has run. The send cannot block while the lock is held: ghz reads the
// channel until it gets this value or the channel is closed, and only Finish closes it.
type constWorkers struct {
	mu       sync.Mutex
	c        chan load.TickValue
	n        uint
	finished bool
}

var _ load.WorkerTicker = (*constWorkers)(nil)

func newConstWorkers(n uint) *constWorkers {
	return &constWorkers{c: make(chan load.TickValue), n: n}
}

// Ticker implements load.WorkerTicker.
func (w *constWorkers) Ticker() <-chan load.TickValue { return w.c }

// Run implements load.WorkerTicker: it starts all n workers at once, unless the run is over.
func (w *constWorkers) Run() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.finished {
		w.c <- load.TickValue{Delta: int(w.n), Done: true}
	}
}

// Finish implements load.WorkerTicker.
func (w *constWorkers) Finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.finished {
		w.finished = true
		close(w.c)
	}
}

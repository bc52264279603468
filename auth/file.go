package auth

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// reloadInterval bounds how often a credentials file is stat'ed for changes.
const reloadInterval = 5 * time.Second

// watched is a file parsed into a T, re-read when its modification time or size changes
// (checked at most every reloadInterval, on use). A file that fails to parse keeps the
// previous value in use.
type watched[T any] struct {
	path  string
	parse func([]byte) (T, error)
	now   func() time.Time

	mu      sync.Mutex
	checked time.Time
	stamp   string
	value   T
}

func newWatched[T any](path string, now func() time.Time, parse func([]byte) (T, error)) (*watched[T], error) {
	w := &watched[T]{path: path, parse: parse, now: now}
	if err := w.load(); err != nil {
		return nil, err
	}
	return w, nil
}

// get returns the file's current value.
func (w *watched[T]) get() T {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.now().Sub(w.checked) >= reloadInterval {
		_ = w.loadLocked() // on failure the previous value stays
	}
	return w.value
}

func (w *watched[T]) load() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.loadLocked()
}

func (w *watched[T]) loadLocked() error {
	w.checked = w.now()
	st, err := os.Stat(w.path)
	if err != nil {
		return err
	}
	stamp := fmt.Sprint(st.ModTime().UnixNano(), st.Size())
	if stamp == w.stamp {
		return nil
	}
	b, err := os.ReadFile(w.path)
	if err != nil {
		return err
	}
	v, err := w.parse(b)
	if err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	w.value, w.stamp = v, stamp
	return nil
}

// Package filewatch keeps a value loaded from files that change under a running process
// (certificates rotated by cert-manager, a key file, a JWKS file): the files are stat'ed at
// most once per interval, on use, and the value is loaded again when any file's modification
// time or size changed. A load that fails keeps the previous value and is tried again at the
// next interval, so a half-written change never replaces a good value.
//
// Why not a library: the maintained watchers (fsnotify, controller-runtime's certwatcher)
// bring goroutines and dependency trees for what is a stat call per interval; a Kubernetes
// secret update swaps a symlink, which a stat sees as well as an inotify watch.
package filewatch

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// Value is a value loaded from files.
type Value[T any] struct {
	paths    []string
	interval time.Duration
	load     func() (T, error)
	// OnReload, when set, is told of every reload and every failed one.
	onReload func(error)
	now      func() time.Time

	mu      sync.Mutex
	checked time.Time
	stamp   string
	value   T
}

// Options configure a Value. Interval is required; Now defaults to time.Now.
type Options struct {
	Interval time.Duration
	Now      func() time.Time
	// OnReload, when set, is told of every reload after the first load, and of every
	// failure to stat or load.
	OnReload func(error)
}

// New loads the value once from paths (empty paths are ignored); it fails when the files
// cannot be stat'ed or loaded.
func New[T any](paths []string, o Options, load func() (T, error)) (*Value[T], error) {
	v := &Value[T]{interval: o.Interval, load: load, onReload: o.OnReload, now: o.Now}
	for _, p := range paths {
		if p != "" {
			v.paths = append(v.paths, p)
		}
	}
	if v.now == nil {
		v.now = time.Now
	}
	stamp, err := v.readStamp()
	if err != nil {
		return nil, err
	}
	if v.value, err = load(); err != nil {
		return nil, err
	}
	v.stamp, v.checked = stamp, v.now()
	return v, nil
}

// Get returns the current value, loading it again first when the files changed.
func (v *Value[T]) Get() T {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.now().Sub(v.checked) < v.interval {
		return v.value
	}
	v.checked = v.now()
	stamp, err := v.readStamp()
	if err == nil && stamp == v.stamp {
		return v.value
	}
	var value T
	if err == nil {
		value, err = v.load()
	}
	if v.onReload != nil {
		v.onReload(err)
	}
	if err == nil {
		v.value, v.stamp = value, stamp
	}
	return v.value
}

// readStamp identifies the files' current versions by modification time and size.
func (v *Value[T]) readStamp() (string, error) {
	var b strings.Builder
	for _, p := range v.paths {
		st, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s:%d:%d;", p, st.ModTime().UnixNano(), st.Size())
	}
	return b.String(), nil
}

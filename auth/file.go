package auth

import (
	"fmt"
	"os"
	"time"

	"github.com/compactord/compactord/internal/filewatch"
)

// reloadInterval bounds how often a credentials file is stat'ed for changes.
const reloadInterval = 5 * time.Second

// watchFile is path parsed into a T, parsed again when the file changes (checked at most every
// reloadInterval, on use). A file that fails to parse keeps the previous value in use.
func watchFile[T any](path string, now func() time.Time, parse func([]byte) (T, error)) (*filewatch.Value[T], error) {
	return filewatch.New([]string{path}, filewatch.Options{Interval: reloadInterval, Now: now}, func() (T, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			var zero T
			return zero, err
		}
		v, err := parse(b)
		if err != nil {
			return v, fmt.Errorf("%s: %w", path, err)
		}
		return v, nil
	})
}

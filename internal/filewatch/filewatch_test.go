package filewatch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	write := func(s string, at time.Time) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Now()
	write("one", base)
	clock := base
	var reloads []error
	v, err := New([]string{path, ""}, Options{Interval: time.Second, Now: func() time.Time { return clock }, OnReload: func(err error) { reloads = append(reloads, err) }},
		func() (string, error) {
			b, err := os.ReadFile(path)
			if strings.HasPrefix(string(b), "bad") {
				return "", errors.New("bad content")
			}
			return string(b), err
		})
	if err != nil || v.Get() != "one" {
		t.Fatalf("New: %v, %q", err, v.Get())
	}
	write("two", base.Add(time.Second))
	if got := v.Get(); got != "one" {
		t.Errorf("within the interval: %q, want the old value", got)
	}
	clock = clock.Add(2 * time.Second)
	if got := v.Get(); got != "two" {
		t.Errorf("after the interval: %q", got)
	}
	write("bad!", base.Add(2*time.Second))
	clock = clock.Add(2 * time.Second)
	if got := v.Get(); got != "two" {
		t.Errorf("a load that fails: %q, want the previous value", got)
	}
	write("three", base.Add(3*time.Second))
	clock = clock.Add(2 * time.Second)
	if got := v.Get(); got != "three" {
		t.Errorf("after the failure was fixed: %q", got)
	}
	if len(reloads) != 3 || reloads[0] != nil || reloads[1] == nil || reloads[2] != nil {
		t.Errorf("reloads %v: want ok, failed, ok", reloads)
	}
	if _, err := New([]string{filepath.Join(t.TempDir(), "missing")}, Options{Interval: time.Second}, func() (int, error) { return 0, nil }); err == nil {
		t.Error("a missing file: no error")
	}
}

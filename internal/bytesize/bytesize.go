// Package bytesize is a flag value in bytes, written and printed with binary suffixes
// (16MiB), shared by compactord's and compactctl's size flags so that both read and print
// a size the same way.
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// Size is a number of bytes. As a flag.Value it accepts a plain number or one with a KiB,
// MiB or GiB suffix, and prints itself with the largest suffix that divides it (64MiB, not
// 67108864), so --help shows defaults as they are written.
type Size int64

// units are the suffixes, largest first.
var units = []struct {
	suffix string
	mult   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}

func (s Size) String() string {
	n := int64(s)
	for _, u := range units {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// Set parses a size: "16777216", "16MiB", "512 KiB".
func (s *Size) Set(v string) error {
	mult := int64(1)
	num := v
	for _, u := range units {
		if strings.HasSuffix(v, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(v, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("%q is not a size in bytes (e.g. 16777216 or 16MiB)", v)
	}
	*s = Size(n * mult)
	return nil
}

// Human is the size for a message, in the largest unit it reaches, with one decimal:
// 38.2 MiB, 512 B.
func (s Size) Human() string {
	for _, u := range units {
		if int64(s) >= u.mult {
			return strconv.FormatFloat(float64(s)/float64(u.mult), 'f', 1, 64) + " " + u.suffix
		}
	}
	return strconv.FormatInt(int64(s), 10) + " B"
}

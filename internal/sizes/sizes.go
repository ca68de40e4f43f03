// Package sizes reads the lists of sizes the benchmarks take ("100k,1M,10M"): whole numbers
// with an optional k (thousand) or M (million) suffix.
package sizes

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse reads a comma-separated list of positive sizes, each a whole number with an optional
// k or K (thousand) or M or m (million) suffix. Empty items are skipped.
func Parse(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		mult := 1
		switch {
		case strings.HasSuffix(f, "k"), strings.HasSuffix(f, "K"):
			mult, f = 1_000, f[:len(f)-1]
		case strings.HasSuffix(f, "M"), strings.HasSuffix(f, "m"):
			mult, f = 1_000_000, f[:len(f)-1]
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive size (e.g. 100k, 1M, 10M)", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

package testenv

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Millis is d in milliseconds, as the cold-start gates print their figures.
func Millis(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000)
}

// Percentile is the nearest-rank p-th percentile of ds (0 for none).
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Mean is the arithmetic mean of ds (0 for none): beside the percentiles
// it shows a bimodal figure's weight, such as cold starts of which some
// wait out a whole probe period.
func Mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

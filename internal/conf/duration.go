package conf

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var (
	isoDuration = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)
	dayDuration = regexp.MustCompile(`^(\d+)d(.*)$`)
)

// ParseDuration is backflow's one duration form, for config keys, flags and replay's
// --by-duration alike: Go's ("500ms", "6h", "1h30m") with days allowed in front ("7d",
// "1d12h"), or ISO-8601's ("P1DT6H", "PT30M", "P7D"), as Kafka's tools take.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	bad := fmt.Errorf("want a duration such as 500ms, 10s, 1h30m, 7d or P1DT6H, got %q", s)
	if strings.HasPrefix(strings.ToUpper(s), "P") {
		u := strings.ToUpper(s)
		m := isoDuration.FindStringSubmatch(u)
		if m == nil || u == "P" || strings.HasSuffix(u, "T") {
			return 0, bad
		}
		var d time.Duration
		for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
			if v := m[i+1]; v != "" {
				x, _ := strconv.ParseFloat(v, 64)
				d += time.Duration(x * float64(unit))
			}
		}
		return d, nil
	}
	var d time.Duration
	rest := s
	if m := dayDuration.FindStringSubmatch(s); m != nil {
		days, err := strconv.ParseInt(m[1], 10, 32)
		if err != nil {
			return 0, bad
		}
		d, rest = time.Duration(days)*24*time.Hour, m[2]
	}
	if rest != "" || d == 0 {
		x, err := time.ParseDuration(rest)
		if err != nil {
			return 0, bad
		}
		d += x
	}
	return d, nil
}

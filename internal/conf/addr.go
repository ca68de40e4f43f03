package conf

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// CheckHostPort is the one check of a host:port address every connection uses (Kafka brokers,
// ClickHouse, Redis, the metrics and dashboard listeners): a host (a listener may leave it
// empty when emptyHost is set, to listen on every interface) and a port from 1 to 65535 (0
// too when zeroPort is set, for a listener that picks a free one). A URL is named as such, as
// it is the usual slip (a ClickHouse HTTP address where the native one is wanted).
//
// An empty addr is ErrNotSet.
func CheckHostPort(addr string, emptyHost, zeroPort bool) error {
	if addr == "" {
		return ErrNotSet
	}
	if strings.Contains(addr, "://") {
		return fmt.Errorf("%q is a URL; want host:port (no scheme)", addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if host == "" && !emptyHost {
		return fmt.Errorf("%q has no host; want host:port", addr)
	}
	lo := 1
	if zeroPort {
		lo = 0
	}
	if n, err := strconv.Atoi(port); err != nil || n < lo || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number from %d to 65535", addr, port, lo)
	}
	return nil
}

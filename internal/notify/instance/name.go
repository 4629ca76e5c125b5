package instance

import (
	"fmt"
	"os"
	"time"
)

// Suffixed returns name+suffix, or "" for "" (a new name per process): the name of a
// further client of the process named name (its DLQ watcher, its dead-letter producer).
func Suffixed(name, suffix string) string {
	if name == "" {
		return ""
	}
	return name + suffix
}

// LaneOwner names this process in the leases its delivery workers take: the stable
// instance name when set (a restart under it takes its predecessor's leases back), else a
// name of its own.
func LaneOwner(instance string) string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	if instance != "" {
		return host + "/" + instance
	}
	return fmt.Sprintf("%s/pid-%d-%d", host, os.Getpid(), time.Now().UnixNano())
}

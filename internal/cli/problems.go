// Problems: validation of the settings, each problem naming its setting, reported all at once.

package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/walletsaga/walletsaga/internal/redact"
	"github.com/walletsaga/walletsaga/internal/retention"
)

// Problems collects validation failures, each naming its field.
type Problems []string

// Addf records a problem with field.
func (p *Problems) Addf(field, format string, args ...any) {
	*p = append(*p, field+": "+fmt.Sprintf(format, args...))
}

// Err returns nil or one error listing every problem.
func (p Problems) Err() error {
	if len(p) == 0 {
		return nil
	}
	return errors.New("invalid configuration:\n  " + strings.Join(p, "\n  "))
}

// CheckHostPort validates a host:port list (comma-separated when many is true).
func (p *Problems) CheckHostPort(field, v string, many bool) {
	if v == "" {
		return // a required setting that is missing is reported as such
	}
	parts := []string{v}
	if many {
		parts = strings.Split(v, ",")
	}
	for _, s := range parts {
		if _, port, err := net.SplitHostPort(strings.TrimSpace(s)); err != nil || port == "" {
			p.Addf(field, "must be host:port, got %q", s)
		}
	}
}

// CheckName validates a topic or group name (RocketMQ: letters, digits, %, -, _, |; ≤ 127).
func (p *Problems) CheckName(field, v string) {
	if v == "" || len(v) > 127 {
		p.Addf(field, "must be 1–127 characters, got %q", v)
		return
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("%-_|", r)) {
			p.Addf(field, "may hold only letters, digits, %%, -, _ and |, got %q", v)
			return
		}
	}
}

// CheckOverride validates the override of a safety check: set, its value is the operator's
// reason, stated in words (it is logged at every start), so "1" or "true" is refused.
func (p *Problems) CheckOverride(field, reason string) {
	if reason != "" && len(strings.Fields(reason)) < 2 {
		p.Addf(field, "must state the reason in words (for example %q), got %q", "load-test cluster, data is disposable", reason)
	}
}

// CheckServiceURL validates the URL of a remote party (a provider): http or https with a
// host; in production plain http only to a loopback host (a sidecar on the same machine),
// since phone numbers, amounts and tokens travel in it.
func (p *Problems) CheckServiceURL(mode Mode, field, v string) {
	if v == "" {
		return // a required setting that is missing is reported as such
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.Addf(field, "must be an http(s) URL with a host, got %q", redact.URL(v))
		return
	}
	if mode == Production && u.Scheme == "http" && !isLoopback(u.Hostname()) {
		p.Addf(field, "must be https in production (plain http only to a loopback sidecar), got %q", redact.URL(v))
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckLog validates LOG_FORMAT and LOG_LEVEL as Logger takes them.
func (p *Problems) CheckLog(format, level string) {
	if _, err := Logger(io.Discard, format, level); err != nil {
		*p = append(*p, err.Error())
	}
}

// CheckRetention validates the pruner's pace and each window of windows (setting name →
// window) against its bounds: in production as the bounds say, in dev from DevMin, so that
// a chaos run can prune within seconds.
func (p *Problems) CheckRetention(mode Mode, batch int, pause time.Duration, windows map[string]time.Duration, bounds map[string]retention.Bounds) {
	if batch < 1 || batch > 10000 {
		p.Addf("RETENTION_BATCH", "must be 1–10000, got %d", batch)
	}
	if pause < 0 || pause > time.Minute {
		p.Addf("RETENTION_PAUSE", "must be 0–1m, got %s", pause)
	}
	names := make([]string, 0, len(windows))
	for name := range windows {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if msg := bounds[name].Check(mode == Dev, windows[name]); msg != "" {
			p.Addf(name, "%s", msg)
		}
	}
}

package ordering

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

var rlogOnce sync.Once

// RouteClientLogs sends the RocketMQ client's own logs (process-global, logrus at info by
// default, very chatty) through log at warn level and above. Only the first call has effect.
func RouteClientLogs(log *slog.Logger) {
	rlogOnce.Do(func() {
		rlog.SetLogger(&slogAdapter{log: log.With("component", "rocketmq-client")})
	})
}

type slogAdapter struct{ log *slog.Logger }

func (a *slogAdapter) emit(level slog.Level, msg string, fields map[string]any) {
	if !a.log.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]slog.Attr, 0, len(fields))
	for k, v := range fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	a.log.LogAttrs(context.Background(), level, strings.TrimSpace(msg), attrs...)
}

// Debug and Info are dropped: the client logs every rebalance and pull at these levels.
func (a *slogAdapter) Debug(string, map[string]any) {}
func (a *slogAdapter) Info(string, map[string]any)  {}
func (a *slogAdapter) Warning(msg string, fields map[string]any) {
	a.emit(slog.LevelWarn, msg, fields)
}
func (a *slogAdapter) Error(msg string, fields map[string]any) { a.emit(slog.LevelError, msg, fields) }
func (a *slogAdapter) Fatal(msg string, fields map[string]any) { a.emit(slog.LevelError, msg, fields) }
func (a *slogAdapter) Level(string)                            {}
func (a *slogAdapter) OutputPath(string) error                 { return nil }

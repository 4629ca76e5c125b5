package ordering

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// clientLog is where the RocketMQ client's own logs go. The client's logger is a
// process-global variable it reads without synchronisation, so it is set once, before any
// client can run (init), to an adapter that reads this pointer; RouteClientLogs only swaps it.
var clientLog atomic.Pointer[slog.Logger]

func init() {
	clientLog.Store(slog.Default().With("component", "rocketmq-client"))
	rlog.SetLogger(slogAdapter{})
}

var rlogOnce sync.Once

// RouteClientLogs sends the RocketMQ client's own logs (process-global, logrus at info by
// default, very chatty) through log at warn level and above. Only the first call has effect.
func RouteClientLogs(log *slog.Logger) {
	rlogOnce.Do(func() {
		clientLog.Store(log.With("component", "rocketmq-client"))
	})
}

type slogAdapter struct{}

func (slogAdapter) emit(level slog.Level, msg string, fields map[string]any) {
	log := clientLog.Load()
	if !log.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]slog.Attr, 0, len(fields))
	for k, v := range fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	log.LogAttrs(context.Background(), level, strings.TrimSpace(msg), attrs...)
}

// Debug and Info are dropped: the client logs every rebalance and pull at these levels.
func (a slogAdapter) Debug(string, map[string]any) {}
func (a slogAdapter) Info(string, map[string]any)  {}
func (a slogAdapter) Warning(msg string, fields map[string]any) {
	a.emit(slog.LevelWarn, msg, fields)
}
func (a slogAdapter) Error(msg string, fields map[string]any) { a.emit(slog.LevelError, msg, fields) }
func (a slogAdapter) Fatal(msg string, fields map[string]any) { a.emit(slog.LevelError, msg, fields) }
func (a slogAdapter) Level(string)                            {}
func (a slogAdapter) OutputPath(string) error                 { return nil }

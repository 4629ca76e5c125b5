// Logger: the binaries' slog logger.

package cli

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/walletsaga/walletsaga/internal/reqid"
	"github.com/walletsaga/walletsaga/internal/telemetry"
)

// Logger returns a slog logger: JSON when format is "json", text otherwise. Records logged
// with a request's context carry its request_id (see reqid), and those logged with a
// context carrying a span its trace_id and span_id (see telemetry.LogHandler).
func Logger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("LOG_LEVEL: %q is not debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(reqid.Handler(telemetry.LogHandler(slog.NewJSONHandler(w, opts)))), nil
	case "text", "":
		return slog.New(reqid.Handler(telemetry.LogHandler(slog.NewTextHandler(w, opts)))), nil
	}
	return nil, fmt.Errorf("LOG_FORMAT: %q is not text or json", format)
}

// Package reqid carries a request id through a context and into every log line written with
// that context: the HTTP layer stores the id, and Handler adds it as "request_id" to each
// record logged with a *Context method (InfoContext, LogAttrs, …).
package reqid

import (
	"context"
	"log/slog"
)

type key struct{}

// With returns ctx carrying id.
func With(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, key{}, id)
}

// From returns the request id ctx carries, or "".
func From(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	id, _ := ctx.Value(key{}).(string)
	return id
}

// Handler wraps h so that records logged with a context carrying a request id get a
// request_id attribute. Wrapping a handler twice adds it once.
func Handler(h slog.Handler) slog.Handler {
	if _, ok := h.(handler); ok {
		return h
	}
	return handler{h}
}

type handler struct{ slog.Handler }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	if id := From(ctx); id != "" {
		r = r.Clone()
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h handler) WithAttrs(as []slog.Attr) slog.Handler { return handler{h.Handler.WithAttrs(as)} }
func (h handler) WithGroup(name string) slog.Handler    { return handler{h.Handler.WithGroup(name)} }

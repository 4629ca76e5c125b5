package main

import (
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/httpapi"
	"github.com/walletsaga/walletsaga/internal/ordering"
)

// routes lists every route of the notifier beyond the probes.
func routes(e *echo.Echo, cfg config, pool *pgxpool.Pool, gate *ordering.Gate, sender notify.Sender, log *slog.Logger) {
	e.GET("/v1/gate", func(c echo.Context) error {
		waiting, err := gate.Waiting(c.Request().Context(), 100)
		if err != nil {
			return err
		}
		if waiting == nil {
			waiting = []ordering.WaitingUser{}
		}
		parked, err := gate.ParkedCount(c.Request().Context())
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"stats": gate.Stats(), "max_attempts": gate.MaxAttempts(), "waiting": waiting, "parked": parked})
	})
	httpapi.Register(e, httpapi.Deps{Store: notify.NewStore(pool), Sender: sender, AdminToken: cfg.AdminToken, Logger: log})
}

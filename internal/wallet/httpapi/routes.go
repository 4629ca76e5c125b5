// Package httpapi is the wallet's REST API on echo: JSON in and out, errors as
// {"error":{"code","message"}} through apperr's one code→status table (see httpx).
package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/wallet"
)

// Register adds every route of the wallet API to e. This is the one list of them.
func Register(e *echo.Echo, svc *wallet.Service) {
	routes := []struct {
		method, path string
		handler      echo.HandlerFunc
	}{
		{http.MethodPost, "/v1/users", createUser(svc)},
		{http.MethodGet, "/v1/users/:id/wallet", getWallet(svc)},
		{http.MethodGet, "/v1/users/:id/events", listEvents(svc)},
		{http.MethodPost, "/v1/users/:id/deposits", deposit(svc)},
		{http.MethodPost, "/v1/users/:id/purchases", purchase(svc)},
		{http.MethodPost, "/v1/transfers", transfer(svc)},
		{http.MethodGet, "/v1/sagas", listSagas(svc)},
		{http.MethodGet, "/v1/sagas/:id", getSaga(svc)},
	}
	for _, r := range routes {
		e.Add(r.method, r.path, r.handler)
	}
}

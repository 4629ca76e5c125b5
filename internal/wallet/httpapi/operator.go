package httpapi

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// operatorSagas serves GET /v1/operator/sagas, the operator console's list: every user's
// sagas in one state (or all), newest first, a page at a time, with the admin token; their
// errors as stored.
func operatorSagas(svc *wallet.Service, adminToken string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := httpx.CheckBearer(c, "admin", "operator endpoints are disabled: no admin token is configured", adminToken); err != nil {
			return err
		}
		return answerSagaPage(c, svc, wallet.SagaFilter{}, forOperator)
	}
}

// operatorSaga serves GET /v1/operator/sagas/{id}: a saga with its step history and every
// error as stored (the remote party's words, its address), with the admin token.
func operatorSaga(svc *wallet.Service, adminToken string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := httpx.CheckBearer(c, "admin", "operator endpoints are disabled: no admin token is configured", adminToken); err != nil {
			return err
		}
		id, err := pathID(c, "saga id")
		if err != nil {
			return err
		}
		op, err := svc.GetSaga(c.Request().Context(), id)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, toSagaBody(op, true, forOperator))
	}
}

type operatorRequest struct {
	Reason string `json:"reason"`
}

// operatorAction serves POST /v1/sagas/{id}/retry and /resolve: admin token, X-Operator,
// a required reason; the action and its audit row commit together.
func operatorAction(adminToken string,
	act func(context.Context, int64, wallet.OperatorAction) (wallet.Operation, error),
) echo.HandlerFunc {
	return func(c echo.Context) error {
		var req operatorRequest
		actor, err := httpx.OperatorRequest(c, adminToken, &req, &req.Reason)
		if err != nil {
			return err
		}
		id, err := pathID(c, "saga id")
		if err != nil {
			return err
		}
		op, err := act(c.Request().Context(), id, wallet.OperatorAction{Actor: actor, Reason: req.Reason})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, toSagaBody(op, true, forOperator))
	}
}

// sagaAudit serves GET /v1/sagas/{id}/audit: the operator actions recorded on a saga.
func sagaAudit(svc *wallet.Service, adminToken string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := httpx.CheckBearer(c, "admin", "operator endpoints are disabled: no admin token is configured", adminToken); err != nil {
			return err
		}
		id, err := pathID(c, "saga id")
		if err != nil {
			return err
		}
		if _, err := svc.GetSaga(c.Request().Context(), id); err != nil {
			return err
		}
		items, err := svc.SagaAudit(c.Request().Context(), id)
		if err != nil {
			return err
		}
		if items == nil {
			items = []wallet.AuditEntry{}
		}
		return c.JSON(http.StatusOK, map[string]any{"items": items})
	}
}

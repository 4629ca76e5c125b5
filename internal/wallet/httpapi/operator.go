package httpapi

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// operatorSagas serves GET /v1/operator/sagas, the operator console's list: every user's
// sagas in one state (or all), newest first, a page at a time, to an operator; their errors
// as stored.
func operatorSagas(svc *wallet.Service, ops httpx.Operators) echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, err := httpx.Operator(c, ops); err != nil {
			return err
		}
		return answerSagaPage(c, svc, wallet.SagaFilter{}, forOperator)
	}
}

// operatorSaga serves GET /v1/operator/sagas/{id}: a saga with its step history and every
// error as stored (the remote party's words, its address), to an operator.
func operatorSaga(svc *wallet.Service, ops httpx.Operators) echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, err := httpx.Operator(c, ops); err != nil {
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

// operatorAction serves POST /v1/sagas/{id}/retry and /resolve: an operator's token, which
// names the actor, and a required reason; the action and its audit row commit together.
func operatorAction(ops httpx.Operators,
	act func(context.Context, int64, wallet.OperatorAction) (wallet.Operation, error),
) echo.HandlerFunc {
	return func(c echo.Context) error {
		var req operatorRequest
		actor, err := httpx.OperatorRequest(c, ops, &req, &req.Reason)
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

// sagaAudit serves GET /v1/sagas/{id}/audit: the operator actions recorded on a saga, to an
// operator.
func sagaAudit(svc *wallet.Service, ops httpx.Operators) echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, err := httpx.Operator(c, ops); err != nil {
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

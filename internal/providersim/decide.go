package providersim

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/walletsaga/walletsaga/internal/provider"
)

// answer is an HTTP status and the JSON body to send with it.
type answer struct {
	status int
	body   any
}

func refusal(status int, code, format string, args ...any) answer {
	return answer{status, provider.ErrorBody{Error: provider.ErrorDetail{Code: code, Message: fmt.Sprintf(format, args...)}}}
}

// firstCharge is what a new charge for req is: declined for DeclinedSource, charged
// otherwise.
func firstCharge(key string, req provider.ChargeRequest) Charge {
	status := ChargeCharged
	if req.Source == DeclinedSource {
		status = ChargeDeclined
	}
	return Charge{Key: key, ID: newID("ch_"), UserID: req.UserID, Amount: req.Amount, Currency: req.Currency, Source: req.Source, Status: status}
}

// chargeAnswer is the answer to a charge with req, given what its key holds after it.
func chargeAnswer(req provider.ChargeRequest, got Charge) answer {
	switch {
	case got.Status == ChargeVoided:
		return refusal(http.StatusPaymentRequired, provider.CodeDeclined, "charge key %q was voided by refund %q", got.Key, got.RefundKey)
	case got.UserID != req.UserID || got.Amount != req.Amount || got.Currency != req.Currency || got.Source != req.Source:
		return refusal(http.StatusUnprocessableEntity, provider.CodeIdempotencyMismatch, "key %q was used for another charge", got.Key)
	case got.Status == ChargeDeclined:
		return refusal(http.StatusPaymentRequired, provider.CodeDeclined, "payment source %q declined", req.Source)
	case got.Status == ChargeRefunded:
		return answer{http.StatusOK, provider.Charge{ChargeID: got.ID, Status: provider.ChargeRefunded}}
	}
	return answer{http.StatusOK, provider.Charge{ChargeID: got.ID, Status: provider.ChargeCharged}}
}

// refundAnswer is the answer to a refund of chargeKey, given what the key holds after it.
func refundAnswer(chargeKey string, got Charge) answer {
	status := map[string]string{
		ChargeRefunded: provider.RefundRefunded,
		ChargeVoided:   provider.RefundVoided,
		ChargeDeclined: provider.RefundNothingToDo,
	}[got.Status]
	if status == "" {
		return refusal(http.StatusInternalServerError, provider.CodeUnavailable, "charge under %q is %s after its refund", chargeKey, got.Status)
	}
	return answer{http.StatusOK, provider.Refund{ChargeKey: chargeKey, Status: status}}
}

// firstOrder is what a new order for req is: rejected for RejectPrefix, pending for
// FlakyPrefix, placed otherwise.
func firstOrder(key string, req provider.OrderRequest) Order {
	status := OrderPlaced
	switch {
	case strings.HasPrefix(req.Reference, RejectPrefix):
		status = OrderRejected
	case strings.HasPrefix(req.Reference, FlakyPrefix):
		status = OrderPending
	}
	return Order{Key: key, ID: newID("ord_"), Merchant: req.Merchant, Reference: req.Reference, Amount: req.Amount, Currency: req.Currency, Status: status}
}

// orderAnswer is the answer to an order with req, given what its key holds after it.
func orderAnswer(req provider.OrderRequest, got Order) answer {
	switch {
	case got.Status == OrderVoided || got.Status == OrderCancelled:
		return refusal(http.StatusUnprocessableEntity, provider.CodeRejected, "order key %q was cancelled by %q", got.Key, got.CancelKey)
	case got.Merchant != req.Merchant || got.Reference != req.Reference || got.Amount != req.Amount || got.Currency != req.Currency:
		return refusal(http.StatusUnprocessableEntity, provider.CodeIdempotencyMismatch, "key %q was used for another order", got.Key)
	case got.Status == OrderRejected:
		return refusal(http.StatusUnprocessableEntity, provider.CodeRejected, "merchant %q rejected order %q", req.Merchant, req.Reference)
	case got.Status == OrderPending:
		return refusal(http.StatusServiceUnavailable, provider.CodeUnavailable, "merchant %q flaky (attempt %d of order %q)", req.Merchant, got.Attempts, req.Reference)
	}
	return answer{http.StatusOK, provider.Order{OrderID: got.ID, Status: provider.OrderPlaced}}
}

// cancelAnswer is the answer to a cancellation of orderKey, given what the key holds after
// it. The simulator cannot cancel a placed order.
func cancelAnswer(orderKey, cancelKey string, got Order) answer {
	switch got.Status {
	case OrderPlaced:
		return refusal(http.StatusUnprocessableEntity, provider.CodeNotCancellable, "order key %q: the order is placed (cancellation %q)", orderKey, cancelKey)
	case OrderCancelled:
		return answer{http.StatusOK, provider.Cancellation{OrderKey: orderKey, Status: provider.CancelCancelled}}
	case OrderVoided:
		return answer{http.StatusOK, provider.Cancellation{OrderKey: orderKey, Status: provider.CancelVoided}}
	case OrderRejected:
		return answer{http.StatusOK, provider.Cancellation{OrderKey: orderKey, Status: provider.CancelNothingToDo}}
	}
	return refusal(http.StatusInternalServerError, provider.CodeUnavailable, "order under %q is %s after its cancellation", orderKey, got.Status)
}

// firstPayout is what a new payout for req is: rejected for a destination starting with
// RejectPrefix, pending for FlakyPrefix, paid otherwise.
func firstPayout(key string, req provider.PayoutRequest) Payout {
	status := PayoutPaid
	switch {
	case strings.HasPrefix(req.Destination, RejectPrefix):
		status = PayoutRejected
	case strings.HasPrefix(req.Destination, FlakyPrefix):
		status = PayoutPending
	}
	return Payout{Key: key, ID: newID("po_"), UserID: req.UserID, Amount: req.Amount, Currency: req.Currency, Destination: req.Destination, Status: status}
}

// payoutAnswer is the answer to a payout with req, given what its key holds after it.
func payoutAnswer(req provider.PayoutRequest, got Payout) answer {
	switch {
	case got.Status == PayoutVoided || got.Status == PayoutCancelled:
		return refusal(http.StatusUnprocessableEntity, provider.CodeRejected, "payout key %q was cancelled by %q", got.Key, got.CancelKey)
	case got.UserID != req.UserID || got.Amount != req.Amount || got.Currency != req.Currency || got.Destination != req.Destination:
		return refusal(http.StatusUnprocessableEntity, provider.CodeIdempotencyMismatch, "key %q was used for another payout", got.Key)
	case got.Status == PayoutRejected:
		return refusal(http.StatusUnprocessableEntity, provider.CodeRejected, "the bank refused the payout to %q", req.Destination)
	case got.Status == PayoutPending:
		return refusal(http.StatusServiceUnavailable, provider.CodeUnavailable, "bank flaky (attempt %d of the payout to %q)", got.Attempts, req.Destination)
	}
	return answer{http.StatusOK, provider.Payout{PayoutID: got.ID, Status: provider.PayoutPaid}}
}

// cancelPayoutAnswer is the answer to a cancellation of payoutKey, given what the key holds
// after it. The simulator cannot call back a paid payout.
func cancelPayoutAnswer(payoutKey, cancelKey string, got Payout) answer {
	switch got.Status {
	case PayoutPaid:
		return refusal(http.StatusUnprocessableEntity, provider.CodeNotCancellable, "payout key %q: the money has left (cancellation %q)", payoutKey, cancelKey)
	case PayoutCancelled:
		return answer{http.StatusOK, provider.PayoutCancellation{PayoutKey: payoutKey, Status: provider.CancelCancelled}}
	case PayoutVoided:
		return answer{http.StatusOK, provider.PayoutCancellation{PayoutKey: payoutKey, Status: provider.CancelVoided}}
	case PayoutRejected:
		return answer{http.StatusOK, provider.PayoutCancellation{PayoutKey: payoutKey, Status: provider.CancelNothingToDo}}
	}
	return refusal(http.StatusInternalServerError, provider.CodeUnavailable, "payout under %q is %s after its cancellation", payoutKey, got.Status)
}

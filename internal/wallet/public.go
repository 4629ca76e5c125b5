package wallet

import "github.com/walletsaga/walletsaga/internal/saga"

// What a user reads of a saga's error, or of a step's: one of a few codes, each with a fixed
// message. What is stored (a remote party's words, its host and address in a connection
// error, the engine's account of the attempts) is for operators: the operator endpoints
// serve it as it is.
const (
	PublicInsufficientFunds   = CodeInsufficientFunds  // the wallet's balance is too low
	PublicBalanceOverflow     = CodeBalanceOverflow    // the receiving balance would exceed its largest
	PublicDeclined            = "declined"             // the payment source was declined
	PublicRejected            = "rejected"             // the merchant refused the order, or the bank the payout
	PublicNotCancellable      = CodeNotCancellable     // an order or payout stands and could no longer be cancelled
	PublicTimeout             = "timeout"              // the remote party did not answer in time
	PublicProviderUnavailable = "provider_unavailable" // the remote party failed, or gave no answer of the contract
	PublicCompensationFailed  = "compensation_failed"  // undoing the operation failed: an operator settles it
	PublicInternal            = "internal"             // anything else: the details are for operators
)

// publicErrors maps each stored code to what its user reads. A code not listed is internal.
// The remote codes are the provider contract's (internal/provider), which a test there
// holds to this table.
var publicErrors = map[string]saga.ErrorInfo{
	CodeInsufficientFunds: {Code: PublicInsufficientFunds, Message: "the wallet's balance is too low for this amount"},
	CodeBalanceOverflow:   {Code: PublicBalanceOverflow, Message: "the receiving wallet's balance would exceed its largest amount"},
	"declined":            {Code: PublicDeclined, Message: "the payment source was declined"},
	"rejected":            {Code: PublicRejected, Message: "the merchant refused the order, or the bank the payout"},
	CodeNotCancellable:    {Code: PublicNotCancellable, Message: "the order or the payout could no longer be cancelled"},
	"timeout":             {Code: PublicTimeout, Message: "the payment gateway or the merchant did not answer in time"},
	"unavailable":         providerUnavailable,
	"rate_limited":        providerUnavailable,
	"in_progress":         providerUnavailable,
	"bad_response":        providerUnavailable,
	saga.CodeCompensationFailed: {Code: PublicCompensationFailed,
		Message: "the operation failed and undoing it failed too: an operator will settle it"},
}

var providerUnavailable = saga.ErrorInfo{Code: PublicProviderUnavailable, Message: "the payment gateway or the merchant did not give a usable answer"}

// PublicCodes lists the codes PublicError gives, as the OpenAPI document's enum does.
func PublicCodes() []string {
	return []string{PublicInsufficientFunds, PublicBalanceOverflow, PublicDeclined, PublicRejected, PublicNotCancellable,
		PublicTimeout, PublicProviderUnavailable, PublicCompensationFailed, PublicInternal}
}

// PublicError classifies a saga's or a step's stored error for the user it belongs to (nil
// stays nil): a code of PublicCodes and that code's fixed message, never the stored words.
func PublicError(e *saga.ErrorInfo) *saga.ErrorInfo {
	if e == nil {
		return nil
	}
	if p, ok := publicErrors[e.Code]; ok {
		return &p
	}
	return &saga.ErrorInfo{Code: PublicInternal, Message: "the operation could not be completed as asked; operators have the details"}
}

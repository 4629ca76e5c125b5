// Package apperr is the application's one error type: a code from a small fixed set, a
// message safe to show to a client, and an optional wrapped cause for the log. HTTP adapters
// map codes to statuses in one table (see Status).
package apperr

import (
	"errors"
	"fmt"
	"net/http"
)

// Code classifies an error for clients and for the code→status table.
type Code string

// The codes. Keep this set small; add one only when a client must act differently on it.
const (
	Invalid           Code = "invalid"
	NotFound          Code = "not_found"
	Gone              Code = "gone" // it existed, and retention has pruned it
	Conflict          Code = "conflict"
	InsufficientFunds Code = "insufficient_funds"
	BalanceOverflow   Code = "balance_overflow" // a credit would take a balance beyond what a wallet holds
	Unauthorized      Code = "unauthorized"
	Forbidden         Code = "forbidden"
	Unprocessable     Code = "unprocessable"
	TooLarge          Code = "too_large"
	Unsupported       Code = "unsupported_media_type"
	MethodNotAllowed  Code = "method_not_allowed" // the path exists, not with this method (the answer lists the others in Allow)
	Unavailable       Code = "unavailable"
	TooManyRequests   Code = "too_many_requests" // a client past its rate (Retry-After says when to come back)
	Internal          Code = "internal"
)

// statuses is THE table mapping codes to HTTP statuses.
var statuses = map[Code]int{
	Invalid:           http.StatusBadRequest,
	NotFound:          http.StatusNotFound,
	Gone:              http.StatusGone,
	Conflict:          http.StatusConflict,
	InsufficientFunds: http.StatusUnprocessableEntity,
	BalanceOverflow:   http.StatusUnprocessableEntity,
	Unauthorized:      http.StatusUnauthorized,
	Forbidden:         http.StatusForbidden,
	Unprocessable:     http.StatusUnprocessableEntity,
	TooLarge:          http.StatusRequestEntityTooLarge,
	Unsupported:       http.StatusUnsupportedMediaType,
	MethodNotAllowed:  http.StatusMethodNotAllowed,
	Unavailable:       http.StatusServiceUnavailable,
	TooManyRequests:   http.StatusTooManyRequests,
	Internal:          http.StatusInternalServerError,
}

// Status returns the HTTP status for a code (500 for an unknown one).
func Status(c Code) int {
	if s, ok := statuses[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Error is an application error.
type Error struct {
	Code    Code
	Message string // safe for clients
	Err     error  // cause, for the log only
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an error with a code and a client-safe message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an error with a code and message that keeps err as its cause.
func Wrap(err error, code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// CodeOf returns the code of the first *Error in err's chain, or Internal.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// Body is the JSON error body: {"error":{"code":"…","message":"…"}}.
type Body struct {
	Error BodyError `json:"error"`
}

// BodyError is the inside of Body.
type BodyError struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

// ToBody returns the client view of err: its code and message for an *Error, a generic
// message for anything else (the details belong in the log).
func ToBody(err error) (int, Body) {
	var e *Error
	if errors.As(err, &e) {
		return Status(e.Code), Body{Error: BodyError{Code: e.Code, Message: e.Message}}
	}
	return http.StatusInternalServerError, Body{Error: BodyError{Code: Internal, Message: "internal error"}}
}

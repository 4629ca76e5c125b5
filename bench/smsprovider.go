package main

import (
	"net/http"
	"time"

	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
)

// startProvider starts the SMS provider the notifier's webhook sender calls (the tests' own,
// with the contract docs/API.md states): it answers after delay, delivers each
// Idempotency-Key once (a key it delivered gets its first answer again, replayed), and fails
// failPhone's SMS for good (503) when set.
func startProvider(delay time.Duration, failPhone string) *smsprovider.Provider {
	p := smsprovider.Start()
	p.SetDelay(delay)
	if failPhone != "" {
		p.SetFault(func(c smsprovider.Call) smsprovider.Fault {
			if c.Phone == failPhone {
				return smsprovider.Fault{Status: http.StatusServiceUnavailable}
			}
			return smsprovider.Fault{}
		})
	}
	return p
}

package main

import (
	"context"
	"net/http"
	"regexp"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
)

// startSMSProvider starts the run's SMS provider, behind the notifiers' webhook sender: the
// tests' own, with the contract the README states (one delivery per Idempotency-Key; a key
// it delivered answers 409). It delivers an SMS by writing it to notify.sms_log, where the
// audit reads what users got; while that table is away (a Postgres restart) it answers 503
// and delivers nothing. The phones matching fail always get 503 (users whose SMS always
// fail); a fault takes it down for everyone or makes it hang (SetOutage, SetHanging).
func startSMSProvider(db *pgxpool.Pool, fail *regexp.Regexp) *smsprovider.Provider {
	p := smsprovider.Start()
	p.SetFault(func(c smsprovider.Call) smsprovider.Fault {
		if fail.MatchString(c.Phone) {
			return smsprovider.Fault{Status: http.StatusServiceUnavailable}
		}
		return smsprovider.Fault{}
	})
	p.OnDeliver(func(ctx context.Context, c smsprovider.Call) error {
		// A row there already is this SMS delivered before an answer was lost: delivered.
		_, err := db.Exec(ctx, `INSERT INTO notify.sms_log (user_id, seq, phone, text, late) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT DO NOTHING`, c.UserID, c.Seq, c.Phone, c.Text, c.Late)
		return err
	})
	return p
}

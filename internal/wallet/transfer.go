package wallet

import (
	"context"
	"strconv"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// KindTransfer is the transfer saga: debit the payer, credit the payee.
const KindTransfer = "transfer"

// ledgerReversal is the ledger's label of a transfer debit credited back.
const ledgerReversal = stepDebit + ":reversal"

// TransferRequest asks to move money from one wallet to another.
type TransferRequest struct {
	From, To       int64
	Amount         Money
	IdempotencyKey string // optional; scoped to From
	// Background returns once the saga is started; it runs on in the background.
	Background bool
}

func (r TransferRequest) normalize() (TransferRequest, error) {
	if err := ValidateID("from", r.From); err != nil {
		return r, err
	}
	if err := ValidateID("to", r.To); err != nil {
		return r, err
	}
	if r.From == r.To {
		return r, apperr.New(apperr.Invalid, "cannot transfer to oneself: from and to are both %d", r.From)
	}
	if err := ValidateAmount("amount", r.Amount); err != nil {
		return r, err
	}
	return r, validateKey(r.IdempotencyKey)
}

// transferInput is a transfer saga's input, as stored.
type transferInput struct {
	From     int64  `json:"from"`
	To       int64  `json:"to"`
	Amount   Money  `json:"amount"`
	Currency string `json:"currency"`
}

// Transfer runs a transfer saga, as Deposit does: all its steps are local, so it is one
// commit. Errors as for Deposit (the payee's balance for BalanceOverflow), plus Invalid for
// a transfer to oneself and Unprocessable for wallets in different currencies. The
// Idempotency-Key is scoped to the payer.
func (s *Service) Transfer(ctx context.Context, r TransferRequest) (Operation, error) {
	r, err := r.normalize()
	if err != nil {
		return Operation{}, err
	}
	hash := requestHash(KindTransfer, strconv.FormatInt(r.From, 10), strconv.FormatInt(r.To, 10), strconv.FormatInt(int64(r.Amount), 10))
	return s.start(ctx, r.From, r.IdempotencyKey, hash, r.Background, func(ctx context.Context) (any, operationRow, error) {
		fromCur, fromOK := s.currencies.Get(r.From)
		toCur, toOK := s.currencies.Get(r.To)
		if !fromOK || !toOK {
			ws, err := getWallets(ctx, s.pool, r.From, r.To)
			if err != nil {
				return nil, operationRow{}, err
			}
			if err := checkCreditFits(ws[1], r.Amount); err != nil {
				return nil, operationRow{}, err
			}
			s.currencies.Add(r.From, ws[0].Currency)
			s.currencies.Add(r.To, ws[1].Currency)
			fromCur, toCur = ws[0].Currency, ws[1].Currency
		}
		if fromCur != toCur {
			return nil, operationRow{}, apperr.New(apperr.Unprocessable, "cannot transfer between wallets in %s and %s", fromCur, toCur)
		}
		currency := fromCur
		in := transferInput{From: r.From, To: r.To, Amount: r.Amount, Currency: currency}
		return in, operationRow{Kind: KindTransfer, UserID: r.From, CounterpartyID: r.To, Amount: r.Amount, Currency: currency, Credited: r.To}, nil
	})
}

// transfer: debit the payer (transfer_out) → credit the payee (transfer_in). Compensation
// of the debit: credit the payer back (reversal). Both steps are local, so the whole
// transfer is one commit; the debit first locks both wallets in user-id order, so two
// opposite transfers cannot deadlock.
var transfer = sagaKind{
	Name:   KindTransfer,
	Events: []walletevent.Kind{walletevent.TransferOut, walletevent.TransferIn, walletevent.Reversal},
	Define: func(p parties) saga.Definition {
		return saga.Definition{Kind: KindTransfer, Steps: []saga.Step{
			{
				Name: stepDebit,
				Do: balanceStep(p, stepDebit, func(in transferInput) Change {
					return Change{UserID: in.From, Amount: -in.Amount, Kind: walletevent.TransferOut, LockFirst: []int64{in.From, in.To}}
				}),
				Compensate: balanceStep(p, ledgerReversal, func(in transferInput) Change {
					return Change{UserID: in.From, Amount: in.Amount, Kind: walletevent.Reversal}
				}),
			},
			{
				Name: stepCredit,
				Do: balanceStep(p, stepCredit, func(in transferInput) Change {
					return Change{UserID: in.To, Amount: in.Amount, Kind: walletevent.TransferIn}
				}),
			},
		}}
	},
}

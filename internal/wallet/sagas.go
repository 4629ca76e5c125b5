package wallet

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// This file is what the wallet's saga kinds share: their registry, the balance step, the
// decoding of an input, the classification of a balance change's failure. Each kind is
// defined in a file of its own, named after it (deposit.go, …): its request and its
// validation, its stored input, its Service method, its steps and compensations, and the
// balance events it emits.

// Step names are also the ledger's step labels (a compensation's label is the step name +
// a suffix) and end the remote steps' idempotency keys ("<key prefix>:<step>", saga.StepKey).
// They are part of stored state: renaming one breaks running sagas. The shared ones:
const (
	stepCredit = "credit"
	stepDebit  = "debit"

	// ledgerRefund is the ledger's label of a debit given back by a compensation.
	ledgerRefund = stepDebit + ":refund"
)

// Failure codes the wallet's steps give (others come from the remote parties).
const (
	CodeInsufficientFunds = "insufficient_funds"
	CodeBalanceOverflow   = "balance_overflow"
	CodeInvalidInput      = "invalid_input"
)

// sagaKind is one kind of saga the wallet runs.
type sagaKind struct {
	// Name is the kind, as sagas.kind and wallet_operations.kind store it.
	Name string
	// Events are the kinds of balance change its steps emit.
	Events []walletevent.Kind
	// Define returns its definition, calling p for its remote steps.
	Define func(p parties) saga.Definition
}

// parties are the remote parties the sagas call.
type parties struct {
	gateway  PaymentGateway
	merchant Merchant
	// committed is Options.EventCommitted (nil when unset).
	committed func(ev PendingEvent, complete bool)
	// noEpoch is Options.EventVersion 1: balance events are written without an epoch.
	noEpoch bool
}

// sagaKinds is the registry: every kind of saga the wallet registers, each defined in its
// own file. A new kind is one more file and one more entry here (docs/DEVELOPING.md has
// the whole list of what a kind needs, and the tests that catch what is forgotten).
var sagaKinds = []sagaKind{deposit, purchase, transfer, withdrawal}

// Kinds returns the saga kinds this package registers (the wallet's sagas), in the order
// the documents list them.
func Kinds() []string {
	out := make([]string, len(sagaKinds))
	for i, k := range sagaKinds {
		out[i] = k.Name
	}
	return out
}

// EventKinds returns, per saga kind, the kinds of balance change its steps emit.
func EventKinds() map[string][]walletevent.Kind {
	out := make(map[string][]walletevent.Kind, len(sagaKinds))
	for _, k := range sagaKinds {
		out[k.Name] = slices.Clone(k.Events)
	}
	return out
}

// StepTuning is passed to every definition; zero fields take the engine's defaults.
type StepTuning struct {
	// Window is how long a remote step whose outcome is uncertain is asked again (same
	// key) before it is compensated; compensations get as long before an operator is needed.
	Window                  time.Duration
	AttemptTimeout          time.Duration
	BackoffBase, BackoffMax time.Duration
}

// definitions returns the definitions of every registered kind, calling gw and m for their
// remote steps, tuned by t.
func definitions(p parties, t StepTuning) []saga.Definition {
	out := make([]saga.Definition, 0, len(sagaKinds))
	for _, k := range sagaKinds {
		d := k.Define(p)
		d.Window, d.AttemptTimeout, d.BackoffBase, d.BackoffMax = t.Window, t.AttemptTimeout, t.BackoffBase, t.BackoffMax
		d.Classify = classifyChange
		out = append(out, d)
	}
	return out
}

// balanceStep is a local step that applies one balance change, derived from the saga's
// input by change (which sets UserID, Amount and Kind), as ledger step name step: one
// statement in the commit that records the step (see QueueChange). Once that commit is
// done, the event it wrote is handed to p.committed.
func balanceStep[In any](p parties, step string, change func(in In) Change) saga.Action {
	return saga.Local(func(s *saga.Instance, b *pgx.Batch) saga.Outcome {
		var in In
		if o, ok := decodeInput(s, &in); !ok {
			return o
		}
		c := change(in)
		c.SagaID, c.Step, c.Traceparent, c.NoEpoch = s.ID, step, s.Traceparent, p.noEpoch
		if p.committed == nil {
			QueueChange(b, c, nil)
			return saga.Done()
		}
		got := &Applied{}
		QueueChange(b, c, got)
		s.AfterCommit(func() {
			if got.Applied {
				p.committed(got.Event, got.PredKnown)
			}
		})
		return saga.Done()
	})
}

// decodeInput decodes a saga's input; a broken input fails the step for good.
func decodeInput(s *saga.Instance, v any) (saga.Outcome, bool) {
	if err := json.Unmarshal(s.Input, v); err != nil {
		return saga.Fail(CodeInvalidInput, fmt.Errorf("saga %d input: %w", s.ID, err)), false
	}
	return saga.Outcome{}, true
}

// classifyChange says what the failure of a balance change's statement means (the
// Definition's Classify): a change that had already been applied is done; a refusal is a
// definite failure with its code; anything else is not recognised (retry).
func classifyChange(err error) (saga.Outcome, bool) {
	err = changeError(err)
	switch {
	case err == nil:
		return saga.Done(), true
	case errors.Is(err, ErrInsufficientFunds):
		return saga.Fail(CodeInsufficientFunds, errors.New("insufficient funds")), true
	case errors.Is(err, ErrBalanceOverflow):
		return saga.Fail(CodeBalanceOverflow, errors.New("the balance would exceed its maximum")), true
	}
	return saga.Outcome{}, false
}

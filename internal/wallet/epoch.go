package wallet

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/pg"
)

// Epochs (docs/ARCHITECTURE.md, "When history rewinds"): the database hands out each
// user's seqs and the event ids, so a restore, a point-in-time recovery, a copy or a
// failover that lost commits hands them out again. An epoch names one unbroken history;
// every event carries its epoch and its user's first seq in it (apply_change.sql), so the
// notifier tells a new event from one it has finished. The check below notices that the
// database is not the one the current epoch began on (its fingerprint changed), and begins
// a new epoch before anything is written in the rewound history; an operator can begin one
// too, for a rewind the fingerprint does not show (a file-system snapshot put back).

var (
	//go:embed sql/epoch_fingerprint.sql
	epochFingerprintSQL string
	//go:embed sql/epoch_fingerprint_oids.sql
	epochFingerprintOIDsSQL string
	//go:embed sql/epoch_lock.sql
	epochLockSQL string
	//go:embed sql/epoch_current.sql
	epochCurrentSQL string
	//go:embed sql/epoch_record_fingerprint.sql
	epochRecordFingerprintSQL string
	//go:embed sql/epoch_mint.sql
	epochMintSQL string
)

// EpochLockKey is the advisory lock (transaction-level) that serialises epoch checks, so
// replicas that start at once on a restored database mint one epoch between them.
const EpochLockKey int64 = 7421_0003

// Epoch is one unbroken history of the wallet's database.
type Epoch struct {
	// Epoch is its number: the microseconds since 1970 when it began, at least one more than
	// the epoch before.
	Epoch    int64
	MintedAt time.Time
	// Reason says why it began ("created", what the check saw change, or an operator's words).
	Reason string
}

// epochCreated is the reason of a database's first epoch (the migration that made the table).
const epochCreated = "created"

// Rewound reports whether the epoch began because the database's history rewound, not with
// the database.
func (e Epoch) Rewound() bool { return e.Reason != epochCreated }

// EpochCheck is what one check found.
type EpochCheck struct {
	// Current is the epoch events are written in after the check.
	Current Epoch
	// Minted is set when the check began Current: the database's history rewound.
	Minted bool
	// Was is the fingerprint the previous epoch recorded, Now the database's (see
	// epoch_fingerprint.sql).
	Was, Now string
}

// Epochs checks and begins the wallet's epochs.
type Epochs struct {
	pool *pgxpool.Pool
}

// NewEpochs returns the epochs of the wallet's database on pool.
func NewEpochs(pool *pgxpool.Pool) *Epochs { return &Epochs{pool: pool} }

// Check compares the database's fingerprint with the one the current epoch recorded: the
// first check of an epoch records it; a different one means the database was restored,
// copied or failed over, and Check begins a new epoch, which every event written after it
// carries. Replicas checking at once take turns (EpochLockKey).
func (e *Epochs) Check(ctx context.Context) (EpochCheck, error) {
	now, err := fingerprint(ctx, e.pool)
	if err != nil {
		return EpochCheck{}, fmt.Errorf("wallet: epoch check: %w", err)
	}
	c := EpochCheck{Now: now}
	err = pg.WithTx(ctx, e.pool, func(tx pgx.Tx) error {
		var err error
		if c.Current, c.Was, err = currentEpoch(ctx, tx); err != nil {
			return err
		}
		switch {
		case c.Was == "":
			_, err = tx.Exec(ctx, epochRecordFingerprintSQL, pg.Args{"epoch": c.Current.Epoch, "fingerprint": c.Now})
			return err
		case sameDatabase(c.Was, c.Now):
			return nil
		}
		c.Minted = true
		c.Current, err = mint(ctx, tx, fmt.Sprintf("the database changed under the wallet (restored, copied or failed over): %s was %s", c.Now, c.Was), c.Now)
		return err
	})
	if err != nil {
		return EpochCheck{}, fmt.Errorf("wallet: epoch check: %w", err)
	}
	return c, nil
}

// Begin begins a new epoch for reason, whatever the fingerprint says: for an operator who put
// back a history the check cannot see rewound (a file-system snapshot of the whole cluster).
func (e *Epochs) Begin(ctx context.Context, reason string) (Epoch, error) {
	if reason == "" {
		return Epoch{}, errors.New("wallet: a new epoch needs a reason")
	}
	now, err := fingerprint(ctx, e.pool)
	if err != nil {
		return Epoch{}, fmt.Errorf("wallet: begin epoch: %w", err)
	}
	var ep Epoch
	err = pg.WithTx(ctx, e.pool, func(tx pgx.Tx) error {
		if _, _, err := currentEpoch(ctx, tx); err != nil {
			return err
		}
		var err error
		ep, err = mint(ctx, tx, reason, now)
		return err
	})
	if err != nil {
		return Epoch{}, fmt.Errorf("wallet: begin epoch: %w", err)
	}
	return ep, nil
}

// sameDatabase reports whether two fingerprints are of one history: equal, or equal where
// both tell (a fingerprint taken without the control data has "-" in its first parts).
func sameDatabase(was, now string) bool {
	w, n := strings.Split(was, "/"), strings.Split(now, "/")
	if len(w) != len(n) {
		return false
	}
	for i := range w {
		if w[i] != n[i] && w[i] != "-" && n[i] != "-" {
			return false
		}
	}
	return true
}

// fingerprint reads the database's fingerprint; without the control data and the WAL
// position on a server that refuses them to this role (SQLSTATE insufficient_privilege).
func fingerprint(ctx context.Context, db *pgxpool.Pool) (string, error) {
	var fp string
	err := db.QueryRow(ctx, epochFingerprintSQL).Scan(&fp)
	if pg.IsCode(err, pgerrcode.InsufficientPrivilege) {
		err = db.QueryRow(ctx, epochFingerprintOIDsSQL).Scan(&fp)
	}
	if err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	return fp, nil
}

// currentEpoch takes the epoch lock for tx and reads the current epoch and its fingerprint.
func currentEpoch(ctx context.Context, tx pgx.Tx) (Epoch, string, error) {
	var (
		ep Epoch
		fp string
	)
	if _, err := tx.Exec(ctx, epochLockSQL, pg.Args{"lock_key": EpochLockKey}); err != nil {
		return Epoch{}, "", fmt.Errorf("epoch lock: %w", err)
	}
	if err := tx.QueryRow(ctx, epochCurrentSQL).Scan(&ep.Epoch, &ep.MintedAt, &ep.Reason, &fp); err != nil {
		return Epoch{}, "", fmt.Errorf("current epoch: %w", err)
	}
	return ep, fp, nil
}

// mint begins a new epoch in tx, which holds the epoch lock.
func mint(ctx context.Context, tx pgx.Tx, reason, fingerprint string) (Epoch, error) {
	if len(reason) > 500 {
		reason = reason[:500]
	}
	var ep Epoch
	if err := tx.QueryRow(ctx, epochMintSQL, pg.Args{"reason": reason, "fingerprint": fingerprint}).Scan(&ep.Epoch, &ep.MintedAt, &ep.Reason); err != nil {
		return Epoch{}, fmt.Errorf("mint epoch: %w", err)
	}
	return ep, nil
}

// EpochWatch runs the epoch check every interval, for a database restored or failed over
// under a running service (the service checks once before it serves, and an operator stops
// it while restoring; this is for the failover, which needs no restart). onCheck, when set,
// receives each check's result (the metrics).
type EpochWatch struct {
	Epochs   *Epochs
	Interval time.Duration
	Log      *slog.Logger
	OnCheck  func(EpochCheck)
}

// Run checks until ctx ends. A failed check is logged and tried again at the next tick.
func (w *EpochWatch) Run(ctx context.Context) error {
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		c, err := w.Epochs.Check(ctx)
		if err != nil {
			if ctx.Err() == nil {
				w.Log.WarnContext(ctx, "epoch check failed; trying again", "err", err)
			}
			continue
		}
		LogEpochCheck(ctx, w.Log, c)
		if w.OnCheck != nil {
			w.OnCheck(c)
		}
	}
}

// LogEpochCheck logs a check that began an epoch, at error level: the wallet's history
// rewound, and the operator must know (docs/RUNBOOK.md, WalletHistoryRewound).
func LogEpochCheck(ctx context.Context, log *slog.Logger, c EpochCheck) {
	if c.Minted {
		log.ErrorContext(ctx, "the wallet's database history rewound: a new epoch begins; events from here on carry it, and the notifier texts them",
			"epoch", c.Current.Epoch, "was", c.Was, "now", c.Now)
	}
}

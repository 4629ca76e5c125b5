// Package retention prunes rows the services no longer need, once their window has passed:
// each table's owner supplies the statement (a bounded batch of the oldest prunable rows,
// deleted under FOR UPDATE SKIP LOCKED), and a Pruner runs them in the background, a batch at
// a time with a pause between batches, so that no statement holds many locks or runs long and
// several replicas share the work instead of waiting for each other. What may be pruned, and
// what never is, is the owner's decision, stated on its statement.
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/walletsaga/walletsaga/internal/lifecycle"
)

// Table is one kind of row a pruner deletes: what its owner prunes, and after how long.
type Table struct {
	// Name names the rows in logs and metrics, e.g. "wallet_events".
	Name string
	// Window is how long a row is kept once it may be pruned; 0 keeps it forever.
	Window time.Duration
	// Prune deletes at most limit rows that became prunable more than window ago and
	// returns how many it deleted. It skips rows others hold locked.
	Prune func(ctx context.Context, window time.Duration, limit int) (int64, error)
	// Oldest returns the age of the oldest row Prune would one day delete (0 when none).
	Oldest func(ctx context.Context) (time.Duration, error)
}

// Observer is told what a pruner did (metrics).
type Observer interface {
	// Pruned reports n rows of table deleted.
	Pruned(table string, n int64)
	// Oldest reports the age of table's oldest retained row.
	Oldest(table string, age time.Duration)
	// Scheduled reports, when the pruner starts (at), that it passes over table every
	// interval. Until its first pass over table finishes, at stands for its last one.
	Scheduled(table string, interval time.Duration, at time.Time)
	// Passed reports a pass over table that finished at at without an error: its batches
	// pruned until one came back short, and its oldest row was read.
	Passed(table string, at time.Time)
}

// Config is how a pruner paces itself.
type Config struct {
	// Batch is the most rows one statement deletes.
	Batch int
	// Pause is the wait between two batches of a table that had more to prune.
	Pause time.Duration
	// Interval is the wait between passes; 0 derives it from the windows (Every).
	Interval time.Duration
	// StatementTimeout bounds one batch (default 10 s).
	StatementTimeout time.Duration
	Logger           *slog.Logger
	Observer         Observer
}

// Pruner prunes its tables in the background, between its Start and its Stop.
type Pruner struct {
	*lifecycle.Runner
	cfg    Config
	tables []Table
}

// New returns a pruner of the tables whose window is not 0.
func New(cfg Config, tables ...Table) (*Pruner, error) {
	if cfg.Batch < 1 {
		return nil, fmt.Errorf("retention: batch must be positive, got %d", cfg.Batch)
	}
	if cfg.Pause < 0 {
		return nil, fmt.Errorf("retention: pause must not be negative, got %s", cfg.Pause)
	}
	if cfg.StatementTimeout <= 0 {
		cfg.StatementTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Pruner{cfg: cfg}
	p.Runner = lifecycle.NewRunner(p.run)
	var windows []time.Duration
	for _, t := range tables {
		if t.Prune == nil || t.Oldest == nil || t.Name == "" {
			return nil, fmt.Errorf("retention: table %q needs a name, Prune and Oldest", t.Name)
		}
		if t.Window < 0 {
			return nil, fmt.Errorf("retention: %s: window must not be negative, got %s", t.Name, t.Window)
		}
		if t.Window > 0 {
			p.tables = append(p.tables, t)
			windows = append(windows, t.Window)
		}
	}
	if p.cfg.Interval <= 0 {
		p.cfg.Interval = Every(windows...)
	}
	return p, nil
}

// Every is the pause between passes for these windows: a quarter of the shortest, between
// 1 s and 1 min, so a row outlives its window by at most about a quarter of it (or a minute).
func Every(windows ...time.Duration) time.Duration {
	every := time.Minute
	for _, w := range windows {
		if w > 0 {
			every = min(every, w/4)
		}
	}
	return max(every, time.Second)
}

// Interval is the pause between two passes.
func (p *Pruner) Interval() time.Duration { return p.cfg.Interval }

// run prunes every Interval until ctx ends, and returns nil then. A failing statement is
// logged and tried again at the next pass.
func (p *Pruner) run(ctx context.Context) error {
	if len(p.tables) == 0 {
		<-ctx.Done()
		return nil
	}
	if p.cfg.Observer != nil {
		now := time.Now()
		for _, t := range p.tables {
			p.cfg.Observer.Scheduled(t.Name, p.cfg.Interval, now)
		}
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := p.Pass(ctx); err != nil && ctx.Err() == nil {
			p.cfg.Logger.Warn("retention: pruning failed; trying again at the next pass", "err", err)
		}
		t.Reset(p.cfg.Interval)
	}
}

// Pass prunes each table until a batch comes back short, pausing between batches, then
// reports each table's oldest retained row, and each table whose pass met no error as
// passed. It returns the rows deleted per table and every error met (a table that fails does
// not keep the others from being pruned).
func (p *Pruner) Pass(ctx context.Context) (map[string]int64, error) {
	pruned := map[string]int64{}
	var errs []error
	for _, t := range p.tables {
		n, perr := p.prune(ctx, t)
		pruned[t.Name] = n
		if perr != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.Name, perr))
		}
		octx, cancel := context.WithTimeout(ctx, p.cfg.StatementTimeout)
		age, oerr := t.Oldest(octx)
		cancel()
		if oerr != nil {
			errs = append(errs, fmt.Errorf("%s: oldest: %w", t.Name, oerr))
		} else if p.cfg.Observer != nil {
			p.cfg.Observer.Oldest(t.Name, age)
		}
		if perr == nil && oerr == nil && p.cfg.Observer != nil {
			p.cfg.Observer.Passed(t.Name, time.Now())
		}
	}
	return pruned, errors.Join(errs...)
}

func (p *Pruner) prune(ctx context.Context, t Table) (int64, error) {
	var total int64
	for {
		bctx, cancel := context.WithTimeout(ctx, p.cfg.StatementTimeout)
		n, err := t.Prune(bctx, t.Window, p.cfg.Batch)
		cancel()
		if err != nil {
			return total, err
		}
		total += n
		if n > 0 && p.cfg.Observer != nil {
			p.cfg.Observer.Pruned(t.Name, n)
		}
		if n < int64(p.cfg.Batch) {
			return total, nil
		}
		if p.cfg.Pause > 0 {
			pause := time.NewTimer(p.cfg.Pause)
			select {
			case <-ctx.Done():
				pause.Stop()
				return total, ctx.Err()
			case <-pause.C:
			}
		} else if ctx.Err() != nil {
			return total, ctx.Err()
		}
	}
}

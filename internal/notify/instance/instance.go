// Package instance keeps a consumer's name, within its group on its host, to one live
// process: a Postgres advisory lock held for as long as the process runs.
package instance

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/lifecycle"
	"github.com/walletsaga/walletsaga/internal/pg"
)

// A consumer's identity at the broker is "IP@instance". The broker locks each queue of an
// orderly group to one such identity for up to 60 s, renewed while the owner lives. A consumer
// that restarts under a new identity (the default: a name unique per process) therefore waits
// for its predecessor's locks to expire before it gets its queues back: after a kill -9 those
// queues deliver nothing for up to a minute. A consumer that restarts under the SAME identity
// is the lock owner already, and takes its queues back at once.
//
// A stable identity is only safe if two live processes never share it, or the broker would
// hand both the same queues. A Claim makes that a checked rule rather than a hope: it
// holds a Postgres advisory lock named after (group, host name, instance) for as long as the
// process runs, so a second live process on the same host with the same name fails at start
// with a clear error, and a killed one releases it with its session. (Processes on other
// hosts have other IPs, hence other identities, even with the same instance name.)

var (
	//go:embed sql/lock.sql
	lockSQL string
	//go:embed sql/unlock.sql
	unlockSQL string
)

// ErrTaken means another live process holds the (group, instance) name.
var ErrTaken = errors.New("instance: consumer instance name in use")

// Claim is a (group, instance) name for this process. Start takes it, or fails with
// ErrTaken; it then keeps it on a dedicated connection and, if that connection is lost (a
// Postgres restart), takes it again; if meanwhile another process took the name, it logs an
// error every retry until Stop (the inbox and the lanes' fenced records keep delivery correct
// even then; only the broker's one-owner-per-queue is weakened). Stop gives the name up.
type Claim struct {
	// Runner holds the name in the background between Start and Stop.
	*lifecycle.Runner
	pool            *pgxpool.Pool
	group, instance string
	log             *slog.Logger
	key             int64
	conn            *pgx.Conn // the lock's connection, taken by Start

	mu   sync.Mutex
	lost bool
}

// New returns the claim of instance in group, not taken yet.
func New(pool *pgxpool.Pool, group, instance string, log *slog.Logger) *Claim {
	c := &Claim{pool: pool, group: group, instance: instance, log: log}
	c.Runner = lifecycle.NewRunner(c.hold)
	return c
}

// instanceLockKey is the advisory lock of (group, instance).
func instanceLockKey(group, host, instance string) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "walletsaga consumer instance\x00%s\x00%s\x00%s", group, host, instance)
	return int64(h.Sum64()) //nolint:gosec // G115: the hash's 64 bits, reinterpreted as the lock key Postgres takes
}

// Start takes the (group, host, instance) name for this process, or returns ErrTaken, and
// keeps it until Stop.
func (c *Claim) Start(ctx context.Context) error {
	if c.conn != nil {
		return lifecycle.ErrStarted
	}
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("host name: %w", err)
	}
	c.key = instanceLockKey(c.group, host, c.instance)
	conn, err := lockOn(ctx, c.pool, c.key)
	if err != nil {
		if errors.Is(err, ErrTaken) {
			return fmt.Errorf("%w: another consumer of group %q on host %q runs as %q; give each replica its own name", ErrTaken, c.group, host, c.instance)
		}
		return err
	}
	c.conn = conn
	return c.Runner.Start(ctx)
}

// lockOn takes the advisory lock on a connection taken out of the pool for good.
func lockOn(ctx context.Context, pool *pgxpool.Pool, key int64) (*pgx.Conn, error) {
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	conn := pc.Hijack()
	var got bool
	if err := conn.QueryRow(ctx, lockSQL, pg.Args{"key": key}).Scan(&got); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx)) // holding no lock: nothing depends on its close
		return nil, err
	}
	if !got {
		_ = conn.Close(context.WithoutCancel(ctx)) // holding no lock: nothing depends on its close
		return nil, ErrTaken
	}
	return conn, nil
}

// hold pings the claim's connection and re-takes the lock when the connection is lost, until
// ctx ends; it then gives the lock up.
func (c *Claim) hold(ctx context.Context) error {
	pool, conn, key, group, instance, log := c.pool, c.conn, c.key, c.group, c.instance, c.log
	defer func() {
		if conn != nil {
			// Unlock before closing: the server ends the session (and drops its locks) only
			// some moments after the socket closes, and a successor may be starting now.
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_, _ = conn.Exec(uctx, unlockSQL, pg.Args{"key": key})
			cancel()
			_ = conn.Close(context.WithoutCancel(ctx)) // a connection given up: its lock ends with it
		}
	}()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if conn != nil {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := conn.Ping(pctx)
			cancel()
			if err == nil {
				continue
			}
			_ = conn.Close(context.WithoutCancel(ctx)) // a connection given up: its lock ends with it
			conn = nil
			log.Warn("consumer instance claim: connection lost; taking the name again", "group", group, "instance", instance, "err", err)
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		next, err := lockOn(lctx, pool, key)
		cancel()
		c.mu.Lock()
		c.lost = err != nil
		c.mu.Unlock()
		switch {
		case err == nil:
			conn = next
			log.Info("consumer instance claim: taken again", "group", group, "instance", instance)
		case errors.Is(err, ErrTaken):
			log.Error("consumer instance claim: another process took this name while the database was away; two live consumers now share a broker identity",
				"group", group, "instance", instance)
		}
	}
}

// Held reports whether the claim is held right now.
func (c *Claim) Held() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.lost
}

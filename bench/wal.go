package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// WriteTx counts the write transactions of a database between two WAL positions, by what
// they wrote: read from the WAL itself (pg_walinspect), so it counts every transaction that
// got a transaction id and committed, whoever ran it, and nothing of other databases.
type WriteTx struct {
	// Saga: touched the wallet's or the saga engine's tables (sagas, saga_steps, wallets,
	// ledger_entries, idempotency_keys, wallet_operations, users, audit).
	Saga int64 `json:"saga"`
	// Relay: touched only wallet_events (marking rows published).
	Relay int64 `json:"relay"`
	// Notifier: touched the notify schema.
	Notifier int64 `json:"notifier"`
	Other    int64 `json:"other"`
}

// All is every write transaction counted.
func (w WriteTx) All() int64 { return w.Saga + w.Relay + w.Notifier + w.Other }

// WALSpan is the WAL a phase wrote, [From, To) as pg_lsn text, recorded during the phase and
// read after every measured part (inspectWAL), so that reading it perturbs no measurement.
type WALSpan struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// walKeeper holds a temporary physical replication slot on an admin connection of its own:
// the WAL written from its creation on stays, across checkpoints, until release.
type walKeeper struct {
	conn *pgxpool.Conn
}

// keepWAL makes sure the run holds its slot from now on (the first call creates it).
func (b *bench) keepWAL(ctx context.Context) error {
	if b.wal != nil {
		return nil
	}
	conn, err := b.admin.Acquire(ctx)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `SELECT pg_create_physical_replication_slot('bench_wal_' || pg_backend_pid(), true, true)`); err != nil {
		conn.Release()
		return fmt.Errorf("replication slot: %w", err)
	}
	b.wal = &walKeeper{conn: conn}
	return nil
}

// releaseWAL drops the slot, if the run holds one.
func (b *bench) releaseWAL() {
	if b.wal == nil {
		return
	}
	_, _ = b.wal.conn.Exec(context.Background(), `SELECT pg_drop_replication_slot('bench_wal_' || pg_backend_pid())`)
	b.wal.conn.Release()
	b.wal = nil
}

// walInspection is one span to read at the end of the run: the database whose transactions
// count, and where the answer goes.
type walInspection struct {
	db   string // URL
	span *WALSpan
	set  func(WriteTx, error)
	// rowDBs are the databases whose rows count in the span's RowWrites (none: db); rows
	// takes them (nil: not counted).
	rowDBs []string
	rows   func(RowWrites, error)
}

// inspectWAL reads, after every measured part, the write transactions of each span the
// phases recorded, then releases the slot.
func (b *bench) inspectWAL(ctx context.Context) error {
	defer b.releaseWAL()
	var todo []walInspection
	for i := range b.res.Phases {
		todo = append(todo, b.res.Phases[i].walInspection())
	}
	if b.res.HalfLoad != nil {
		todo = append(todo, b.res.HalfLoad.walInspection())
	}
	if b.res.DTM != nil {
		for i := range b.res.DTM.Phases {
			todo = append(todo, b.res.DTM.Phases[i].walInspection(b.dtmDB))
		}
		for i := range b.res.DTM.Work {
			todo = append(todo, b.res.DTM.Work[i].walInspection(b.dtmDB, b.dtmWorkDB))
		}
	}
	todo = slices.DeleteFunc(todo, func(w walInspection) bool { return w.span == nil })
	if len(todo) == 0 {
		return nil
	}
	done := b.step(fmt.Sprintf("reading the WAL of %d phases (pg_walinspect)", len(todo)))
	defer done()
	t0 := time.Now()
	pools := map[string]*pgxpool.Pool{}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, w := range todo {
		db, ok := pools[w.db]
		if !ok {
			var err error
			if db, err = pgxpool.New(ctx, w.db); err != nil {
				return err
			}
			pools[w.db] = db
		}
		w.set(writeTx(ctx, db, w.span.From, w.span.To))
		if w.rows == nil {
			continue
		}
		var all RowWrites
		var err error
		for _, u := range append([]string{w.db}, w.rowDBs...) {
			p, ok := pools[u]
			if !ok {
				if p, err = pgxpool.New(ctx, u); err != nil {
					break
				}
				pools[u] = p
			}
			var rw RowWrites
			if rw, err = rowWrites(ctx, p, w.span.From, w.span.To); err != nil {
				break
			}
			all.WALBytes = rw.WALBytes
			all.Tables = append(all.Tables, rw.Tables...)
		}
		w.rows(all, err)
	}
	b.res.Notes = append(b.res.Notes, fmt.Sprintf("the WAL of %d phases was read after the last measured part, in %.1f s", len(todo), time.Since(t0).Seconds()))
	return nil
}

// walInspection is the phase's span on its database (the product's, or a retention run's),
// whose answer fills Writes (or the note).
func (ph *Phase) walInspection() walInspection {
	return walInspection{db: ph.dbURL, span: ph.WAL, set: func(w WriteTx, err error) {
		if err != nil {
			ph.Note += " write transactions: " + err.Error()
			return
		}
		ph.Writes = &w
	}, rows: func(r RowWrites, err error) {
		if err != nil {
			ph.Note += " rows: " + err.Error()
			return
		}
		ph.Rows = &r
	}}
}

// writeTx reads the WAL between from and to (pg_lsn text) and classifies the committed
// transactions of db's database by the relations their records touched.
func writeTx(ctx context.Context, db *pgxpool.Pool, from, to string) (WriteTx, error) {
	var w WriteTx
	if _, err := db.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`); err != nil {
		return w, fmt.Errorf("pg_walinspect: %w", err)
	}
	err := db.QueryRow(ctx, `
WITH rels AS (
    SELECT c.relfilenode AS rel,
        CASE
            WHEN n.nspname = 'notify' THEN 'notifier'
            WHEN COALESCE(t.relname, c.relname) = 'wallet_events' THEN 'events'
            WHEN COALESCE(t.relname, c.relname) IN ('sagas', 'saga_steps', 'wallets', 'ledger_entries',
                'idempotency_keys', 'wallet_operations', 'users', 'audit') THEN 'saga'
            ELSE 'other'
        END AS cat
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_index i ON i.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = i.indrelid
    WHERE c.relfilenode <> 0
), r AS (
    SELECT xid::text::bigint AS xid, resource_manager, record_type, block_ref
    FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)
), committed AS (
    SELECT DISTINCT xid FROM r WHERE resource_manager = 'Transaction' AND record_type LIKE 'COMMIT%'
), refs AS (
    SELECT r.xid, m[1]::oid AS dbid, m[2]::oid AS rel
    FROM r, regexp_matches(r.block_ref, 'rel \d+/(\d+)/(\d+)', 'g') AS m
    WHERE r.xid <> 0
), tx AS (
    SELECT refs.xid,
        bool_or(rels.cat = 'saga') AS saga, bool_or(rels.cat = 'notifier') AS notifier,
        bool_or(rels.cat = 'events') AS events
    FROM refs JOIN committed USING (xid) LEFT JOIN rels ON rels.rel = refs.rel
    WHERE refs.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
    GROUP BY refs.xid
)
SELECT count(*) FILTER (WHERE saga),
       count(*) FILTER (WHERE NOT saga AND notifier),
       count(*) FILTER (WHERE NOT saga AND NOT notifier AND events),
       count(*) FILTER (WHERE NOT saga AND NOT notifier AND NOT events)
FROM tx`, from, to).Scan(&w.Saga, &w.Notifier, &w.Relay, &w.Other)
	if err != nil {
		return w, fmt.Errorf("reading the WAL: %w", err)
	}
	return w, nil
}

// RowWrites is what the transactions of a span wrote, table by table, read from the WAL: rows
// inserted, updated (HOT or not), deleted and locked (a foreign key's check of the row it
// points at locks it, FOR KEY SHARE), and the index entries written (B-tree leaf inserts: an
// insert, and an update that is not HOT, write one in each index of the table whose
// predicate the row meets).
type RowWrites struct {
	Tables []TableWrites `json:"tables"`
	// WALBytes is all the WAL the cluster wrote over the span.
	WALBytes int64 `json:"wal_bytes"`
}

// TableWrites is what a span wrote to one table (schema-qualified outside public).
type TableWrites struct {
	Table        string `json:"table"`
	Inserted     int64  `json:"inserted"`
	Updated      int64  `json:"updated"` // not HOT
	HOT          int64  `json:"hot_updated"`
	Deleted      int64  `json:"deleted"`
	Locked       int64  `json:"locked"`
	IndexEntries int64  `json:"index_entries"`
}

// Total is the sum over the tables.
func (r RowWrites) Total() TableWrites {
	t := TableWrites{Table: "all"}
	for _, w := range r.Tables {
		t.Inserted += w.Inserted
		t.Updated += w.Updated
		t.HOT += w.HOT
		t.Deleted += w.Deleted
		t.Locked += w.Locked
		t.IndexEntries += w.IndexEntries
	}
	return t
}

// Rows is every row written: inserted, updated (a new version each) or deleted.
func (t TableWrites) Rows() int64 { return t.Inserted + t.Updated + t.HOT + t.Deleted }

// rowWrites reads the WAL between from and to and counts, per table of db's database, the
// row and index records written.
func rowWrites(ctx context.Context, db *pgxpool.Pool, from, to string) (RowWrites, error) {
	var out RowWrites
	if _, err := db.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`); err != nil {
		return out, fmt.Errorf("pg_walinspect: %w", err)
	}
	rows, err := db.Query(ctx, `
WITH rels AS (
    SELECT c.relfilenode AS rel,
        CASE WHEN n.nspname = 'public' THEN '' ELSE n.nspname || '.' END || COALESCE(t.relname, c.relname) AS tbl
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_index i ON i.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = i.indrelid
    WHERE c.relfilenode <> 0
), r AS (
    SELECT resource_manager AS rm, split_part(record_type, '+', 1) AS rt, m[1]::oid AS dbid, m[2]::oid AS rel
    FROM (SELECT resource_manager, record_type, regexp_match(block_ref, 'rel \d+/(\d+)/(\d+)') AS m
          FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn) WHERE block_ref IS NOT NULL) x
    WHERE m IS NOT NULL
)
SELECT rels.tbl,
    count(*) FILTER (WHERE rm = 'Heap' AND rt = 'INSERT') + count(*) FILTER (WHERE rm = 'Heap2' AND rt = 'MULTI_INSERT'),
    count(*) FILTER (WHERE rm = 'Heap' AND rt = 'UPDATE'),
    count(*) FILTER (WHERE rm = 'Heap' AND rt = 'HOT_UPDATE'),
    count(*) FILTER (WHERE rm = 'Heap' AND rt = 'DELETE'),
    count(*) FILTER (WHERE rm = 'Heap' AND rt = 'LOCK'),
    count(*) FILTER (WHERE rm = 'Btree' AND rt IN ('INSERT_LEAF', 'INSERT_POST'))
FROM r JOIN rels USING (rel)
WHERE r.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
GROUP BY rels.tbl ORDER BY rels.tbl`, from, to)
	if err != nil {
		return out, fmt.Errorf("reading the WAL: %w", err)
	}
	out.Tables, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (TableWrites, error) {
		var t TableWrites
		return t, r.Scan(&t.Table, &t.Inserted, &t.Updated, &t.HOT, &t.Deleted, &t.Locked, &t.IndexEntries)
	})
	if err != nil {
		return out, fmt.Errorf("reading the WAL: %w", err)
	}
	err = db.QueryRow(ctx, `SELECT pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn)::bigint`, from, to).Scan(&out.WALBytes)
	return out, err
}

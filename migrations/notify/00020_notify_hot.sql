-- +goose Up
-- Hot rows. Every SMS updates its user's notify.progress row twice (the claim that leases the
-- user, the record that advances it) and its notify.notifications row once, and inserts and
-- deletes rows of notify.wakes. An UPDATE that changes no indexed column (predicates of
-- partial indexes count) and finds room on the row's own page is a heap-only tuple (HOT): no
-- index entry is written, and the old version is pruned from the page without waiting for
-- vacuum. The claim and the record touch only unindexed columns of notify.progress (lease,
-- fence, last_seq, updated_at): due_at (progress_due) stays NULL for a user woken by news,
-- and gap_since (progress_gap) stays NULL while nothing is missing; what changes an indexed
-- column is off the hot path (a retry or a postponed send sets due_at, a gap sets
-- gap_since). Nothing on the hot path may index those columns.

-- progress: leave a third of each page free, so that the two updates per SMS find room on
-- the row's own page (a row is ~100 bytes; its HOT chain is pruned in place). Vacuum it
-- early and often: a table of one row per user updated per SMS accumulates dead versions
-- much faster than the default 20% scale factor notices. (A new fillfactor applies to pages
-- as they are written; no rewrite is needed.)
ALTER TABLE notify.progress SET (fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.05);

-- wakes: a queue of a few rows per active user, inserted by the inbox, marked by the claim
-- (fence: the claim that read it; an unindexed column, so a HOT update) and deleted when the
-- user goes idle. A row marked by a claim stays while the user is leased: should its lane
-- die, it makes the user claimable again once the lease runs out (the claim no longer sets
-- due_at for that). Keep room on each page for the mark, and vacuum the churn soon: the
-- table should stay a few pages long, and its deleted rows otherwise linger in its indexes.
ALTER TABLE notify.wakes ADD COLUMN fence bigint;
ALTER TABLE notify.wakes SET (fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 5000);

-- notifications (the inbox): a record that finishes a row cannot be HOT whatever is done
-- here: status and finished_at are in the predicates or keys of the indexes that find
-- pending rows, dead letters and what retention prunes. updated_at is indexed
-- (notifications_changes) for the SMS log's change feed and activity page, which page by
-- it and must see every change, so it stays; it costs only the updates that do not finish
-- a row (a retry), which are off the hot path. Each row becomes dead once, when it is
-- finished: vacuum sooner than the default, so index scans of recent rows do not wade
-- through dead ones.
ALTER TABLE notify.notifications SET (autovacuum_vacuum_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.05);

-- +goose Down
ALTER TABLE notify.notifications RESET (autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor);
ALTER TABLE notify.wakes RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold);
ALTER TABLE notify.wakes DROP COLUMN fence;
ALTER TABLE notify.progress RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_analyze_scale_factor);

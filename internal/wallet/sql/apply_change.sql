-- Apply change: one balance change of a saga step, in one statement: it changes the balance
-- of user @user_id by @amount (signed: negative debits) under the wallet row lock, advances
-- the user's event_seq, and inserts the ledger row of (@saga_id, @step) and the outbox row
-- (wallet_events, of kind @kind, with the traceparent @traceparent, '' stores NULL) with that
-- seq. A (saga, step, user) already in the ledger changes nothing (then e is empty). The
-- event carries the current epoch (the newest of wallet_epochs) and the user's first seq in
-- it: this seq, when the wallet's previous change was in an earlier epoch. A wallet's epoch
-- never goes back: a statement that waited for the row lock behind a change of a newer
-- epoch reads wallet_epochs as its snapshot had it, before that epoch began, but the wallet
-- row as that change left it (Read Committed re-checks only the locked row), and writes in
-- the wallet's epoch. Written in the older one, past the newer one's first seq, the
-- notifier would set it aside as of a rewound history, never sent.
-- With @epochs false (EVENT_VERSION=1, beside a notifier of the previous release) it carries
-- none (epoch 0, a version 1 body), as the previous release wrote them, and the wallet's
-- epoch stays as it was.
--
-- It returns one row: the event written (NULLs when none), the id of the user's previous
-- event and whether that one is published (read in the statement's snapshot: when it
-- committed after it, it is not seen), and whether the wallet exists. It fails when the
-- change cannot apply: the wallets CHECK wallets_balance_check (below zero), bigint out of
-- range, or the ledger's UNIQUE ledger_entries_step_once (a concurrent commit applied the
-- same step first); see changeError.
--
-- Locks: the wallets row of @user_id, and the new ledger_entries and wallet_events rows.
WITH w AS (
    UPDATE wallets SET balance = balance + @amount, event_seq = event_seq + 1, updated_at = now(),
        epoch = CASE WHEN @epochs::boolean THEN greatest(wallets.epoch, cur.epoch) ELSE wallets.epoch END,
        epoch_since = CASE WHEN NOT @epochs::boolean OR wallets.epoch >= cur.epoch THEN wallets.epoch_since ELSE wallets.event_seq + 1 END
    FROM (SELECT max(epoch) AS epoch FROM wallet_epochs) cur
    WHERE user_id = @user_id
      AND NOT EXISTS (SELECT 1 FROM ledger_entries WHERE saga_id = @saga_id AND step = @step AND user_id = @user_id)
    RETURNING balance, event_seq, currency,
        CASE WHEN @epochs::boolean THEN wallets.epoch ELSE 0 END AS epoch,
        CASE WHEN @epochs::boolean THEN wallets.epoch_since ELSE 1 END AS epoch_since
), l AS (
    INSERT INTO ledger_entries (user_id, saga_id, step, amount, balance_after)
    SELECT @user_id, @saga_id, @step, @amount, w.balance FROM w
), e AS (
    INSERT INTO wallet_events (user_id, seq, kind, amount, currency, balance_after, saga_id, phone, locale, traceparent, epoch, epoch_since)
    SELECT @user_id, w.event_seq, @kind, @amount, w.currency, w.balance, @saga_id, u.phone, u.locale, NULLIF(@traceparent::text, ''),
           w.epoch, w.epoch_since
    FROM w JOIN users u ON u.id = @user_id
    RETURNING id, seq, balance_after, currency, phone, locale, occurred_at, epoch, epoch_since
)
SELECT e.id, e.seq, e.balance_after, e.currency, e.phone, e.locale, e.occurred_at, e.epoch, e.epoch_since,
       p.id, p.published_at IS NOT NULL, EXISTS (SELECT 1 FROM wallets WHERE user_id = @user_id)
FROM (SELECT 1) one LEFT JOIN e ON true
LEFT JOIN wallet_events p ON p.user_id = @user_id AND p.seq = e.seq - 1

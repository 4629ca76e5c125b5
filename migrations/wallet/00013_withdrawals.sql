-- +goose Up
-- Withdrawals: a saga kind (wallet_operations.kind 'withdrawal', with the bank account it
-- pays out to) and two kinds of balance event ('withdrawal', 'withdrawal_refund'). The
-- kinds' one list is internal/walletevent (events) and internal/wallet's registry (sagas);
-- internal/wallet's TestTheDatabaseChecksAllowExactlyTheKinds holds these CHECKs to them.
ALTER TABLE wallet_events DROP CONSTRAINT wallet_events_kind_check;
ALTER TABLE wallet_events ADD CONSTRAINT wallet_events_kind_check
    CHECK (kind IN ('deposit', 'purchase', 'refund', 'transfer_out', 'transfer_in', 'reversal', 'withdrawal', 'withdrawal_refund'));

ALTER TABLE wallet_operations DROP CONSTRAINT wallet_operations_kind_check;
ALTER TABLE wallet_operations ADD CONSTRAINT wallet_operations_kind_check
    CHECK (kind IN ('deposit', 'purchase', 'transfer', 'withdrawal'));
ALTER TABLE wallet_operations ADD COLUMN destination text;

-- +goose Down
-- Going below 13 would drop what withdrawals recorded (their bank accounts) and leave rows
-- the old CHECKs refuse: refused while any exist. Nothing else is lost.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM wallet_operations WHERE kind = 'withdrawal')
       OR EXISTS (SELECT 1 FROM wallet_events WHERE kind IN ('withdrawal', 'withdrawal_refund')) THEN
        RAISE EXCEPTION 'withdrawals exist: migration 00013 cannot be undone without deleting them, which it will not do';
    END IF;
END
$$;
-- +goose StatementEnd
ALTER TABLE wallet_operations DROP COLUMN destination;
ALTER TABLE wallet_operations DROP CONSTRAINT wallet_operations_kind_check;
ALTER TABLE wallet_operations ADD CONSTRAINT wallet_operations_kind_check
    CHECK (kind IN ('deposit', 'purchase', 'transfer'));

ALTER TABLE wallet_events DROP CONSTRAINT wallet_events_kind_check;
ALTER TABLE wallet_events ADD CONSTRAINT wallet_events_kind_check
    CHECK (kind IN ('deposit', 'purchase', 'refund', 'transfer_out', 'transfer_in', 'reversal'));

-- Bounds: the limits one transaction keeps (SET LOCAL, which set_config with is_local is),
-- each in milliseconds; NULL leaves the session's own setting.
SELECT set_config('lock_timeout', COALESCE(@lock_ms::text, current_setting('lock_timeout')), true),
       set_config('statement_timeout', COALESCE(@statement_ms::text, current_setting('statement_timeout')), true),
       set_config('idle_in_transaction_session_timeout', COALESCE(@idle_in_tx_ms::text,
           current_setting('idle_in_transaction_session_timeout')), true)

-- +goose Up
-- The wallet's epochs at the gate (docs/ARCHITECTURE.md, "When history rewinds"). Each event
-- carries the epoch of the wallet's history it was written in, and its user's first seq in
-- that epoch. A user's position remembers the epoch of the newest events it took (0: events
-- that said none, from before epochs) and its first seq in it (epoch_since). An event of a
-- later epoch rewinds the user: what the gate holds of it from that epoch's first seq on
-- belongs to a history the wallet no longer has, and moves to notify.rewound; the user
-- stands just before that seq, so the new events are texted, in order. An event of an
-- earlier epoch from the current epoch's first seq on is stale: kept in notify.rewound,
-- never sent. Constant defaults: nothing is rewritten.
ALTER TABLE notify.progress ADD COLUMN epoch bigint NOT NULL DEFAULT 0,
                            ADD COLUMN epoch_since bigint NOT NULL DEFAULT 1;

-- What the gate set aside of histories the wallet rewound: the inbox rows and SMS log rows of
-- a rewound user from the new epoch's first seq on (what, status as they were), and the
-- stale events that arrived after it (what = 'arrival'). epoch is the history they belong
-- to, by_epoch the one that replaced it. Kept for the operator (each rewind is in the audit trail too), pruned
-- after RETENTION_AUDIT.
CREATE TABLE notify.rewound (
    id         bigserial   PRIMARY KEY,
    user_id    bigint      NOT NULL,
    seq        bigint      NOT NULL,
    what       text        NOT NULL CHECK (what IN ('inbox', 'sms_log', 'arrival')),
    status     text,
    epoch      bigint      NOT NULL,
    by_epoch   bigint      NOT NULL,
    msg_id     text,
    event      jsonb,
    text       text,
    at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX rewound_user ON notify.rewound (user_id, seq);
CREATE INDEX rewound_at ON notify.rewound (at);

-- +goose Down
DROP TABLE notify.rewound;
ALTER TABLE notify.progress DROP COLUMN epoch, DROP COLUMN epoch_since;

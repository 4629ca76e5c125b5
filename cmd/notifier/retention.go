package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walletsaga/walletsaga/internal/notify/deadletters"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
	"github.com/walletsaga/walletsaga/internal/retention"
)

// newPruner is the notifier's pruner: finished inbox rows, the SMS log and wake rows (the
// gate's), bad messages once in the DLQ topic (the inbox's), the operators' audit trail
// (the dead letters') and what was set aside of rewound histories (the gate's, on the
// audit's window), each by its owner's statement. notify.progress is never pruned.
func newPruner(cfg config, log *slog.Logger, reg prometheus.Registerer, gates *gate.Store, bad *inbox.Store, operator *deadletters.Operator) (*retention.Pruner, error) {
	return cfg.NewPruner(log, reg,
		retention.Table{Name: "notify.notifications", Window: cfg.RetentionInbox, Prune: gates.PruneInbox, Oldest: gates.OldestInbox},
		retention.Table{Name: "notify.sms_log", Window: cfg.RetentionSMSLog, Prune: gates.PruneSMSLog, Oldest: gates.OldestSMSLog},
		retention.Table{Name: "notify.wakes", Window: cfg.RetentionWakes, Prune: gates.PruneWakes, Oldest: gates.OldestWake},
		retention.Table{Name: "notify.bad_messages", Window: cfg.RetentionBadMessages, Prune: bad.PruneBad, Oldest: bad.OldestBad},
		retention.Table{Name: "notify.audit", Window: cfg.RetentionAudit, Prune: operator.PruneAudit, Oldest: operator.OldestAudit},
		retention.Table{Name: "notify.rewound", Window: cfg.RetentionAudit, Prune: gates.PruneRewound, Oldest: gates.OldestRewound},
	)
}

// Package gate delivers each user's SMS in order, through the gate. The rule:
//
//	send (user, seq) only after seq−1 is recorded sent, dead-lettered or skipped;
//	a redelivered finished seq is ignored;
//	a record applies only under the fence its claim took.
//
// The lanes (Lanes) claim due users, send each one's next SMS and record the outcome under
// the claim's fence; the retry policy (RetryPolicy) decides what a failed send becomes. The
// package owns the delivery tables (see Store) and every statement that writes them.
package gate

// Notification statuses, as notify.notifications stores them.
const (
	StatusPending      = "pending"
	StatusSent         = "sent"
	StatusDeadLettered = "dead_lettered"
	StatusSkipped      = "skipped_by_operator"
)

package saga

// ListSQL is List's statement for a filter, for the plan test.
var ListSQL = listSQL

// ErrMoved is the error a runner whose saga another runner took over returns.
var ErrMoved = errMoved

// OnCommitQueued calls fn each time a commit of e joins the queue for a group; set it
// before any commit is sent.
func OnCommitQueued(e *Engine, fn func()) { e.commits.queued = fn }

// QueuedCommits is how many commits of e wait for a group.
func QueuedCommits(e *Engine) int { return e.commits.queuedCommits() }

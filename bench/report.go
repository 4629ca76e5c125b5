package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// table is rendered both as aligned text and as Markdown.
type table struct {
	title string
	head  []string
	rows  [][]string
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func f0(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

func d(v int64) string { return strconv.FormatInt(v, 10) }

func perOp(cpuS float64, n int64) string {
	if n == 0 {
		return "-"
	}
	return f1(cpuS * 1000 / float64(n))
}

func (r *Results) tables() []table {
	var ts []table
	if len(r.RawPG) > 0 {
		t := table{title: fmt.Sprintf("Ceiling: raw Postgres, wallet-step transaction (pgx; UPDATE 1 row + INSERT 2 rows + COMMIT; others used %.0f%% of the CPUs meanwhile)", r.RawPGOthers*100),
			head: []string{"clients", "settings", "tx/s", "p50 ms", "p95 ms", "p99 ms", "errors"}}
		for _, p := range r.RawPG {
			t.rows = append(t.rows, []string{strconv.Itoa(p.Clients), settingName(p.Setting), f0(p.TPS), f1(p.Latency.P50), f1(p.Latency.P95), f1(p.Latency.P99), d(p.Errors)})
		}
		ts = append(ts, t)
	}
	if len(r.PGBench) > 0 {
		t := table{title: fmt.Sprintf("Ceiling: pgbench TPC-B-like (scale %v, -j 2)", r.Settings["pgbench_scale"]), head: []string{"clients", "tps", "avg ms"}}
		for _, p := range r.PGBench {
			t.rows = append(t.rows, []string{strconv.Itoa(p.Clients), f0(p.TPS), f1(p.AvgMS)})
		}
		ts = append(ts, t)
	}
	if m := r.RawMQ; m != nil {
		t := table{title: fmt.Sprintf("Ceiling: raw RocketMQ (project client; %d queues, %d users, %d-byte wallet-event bodies, no database)", m.Queues, m.Users, m.BodyBytes),
			head: []string{"what", "messages", "msg/s", "p50 ms", "p99 ms", "note"}}
		t.rows = append(t.rows,
			[]string{fmt.Sprintf("ordered SendSync, %d senders", m.Senders), d(m.Sent), f0(m.SendRate), f1(m.SendLatency.P50), f1(m.SendLatency.P99), fmt.Sprintf("%d send errors", m.SendErrors)},
			[]string{"orderly consume, no-op handler", d(m.Consumed), f0(m.ConsumeRate), "", "", fmt.Sprintf("first message %.1fs after start; busy %.1fs", m.StartupSecs, m.ConsumeSecs)})
		ts = append(ts, t)
	}
	if len(r.Phases) > 0 {
		t := table{title: "Product: sagas with ?wait=true and an Idempotency-Key (closed loop); commit→SMS = outbox occurred_at → notify.sms_log sent_at",
			head: []string{"kind", "settings", "clients", "sagas/s", "ok", "failed", "202", "err", "API p50", "p95", "p99 ms",
				"commit→SMS p50", "p95", "p99 ms", "→published p99", "SMS/s", "SMS ÷ events", "CPU ms/saga wallet", "notifier", "postgres", "broker", "bench", "all",
				"DB commits/saga", "write tx/saga: saga", "relay", "notifier", "read tx/saga", "others CPU"}}
		rows := append([]Phase(nil), r.Phases...)
		if r.HalfLoad != nil {
			rows = append(rows, *r.HalfLoad)
		}
		for _, p := range rows {
			clients := strconv.Itoa(p.Clients)
			if p.OpenRate > 0 {
				clients = "open " + f1(p.OpenRate) + "/s"
			}
			commits := "-"
			if p.Completed > 0 {
				commits = f1(float64(p.commits()) / float64(p.Completed))
			}
			per := func(n int64) string {
				if p.Completed == 0 {
					return "-"
				}
				return strconv.FormatFloat(float64(n)/float64(p.Completed), 'f', 2, 64)
			}
			ws := []string{"-", "-", "-", "-"}
			if w, reads, ok := p.writeAndReadTx(); ok {
				ws = []string{per(w.Saga), per(w.Relay), per(w.Notifier), per(reads)}
			}
			t.rows = append(t.rows, append([]string{p.Kind, settingName(p.Setting), clients, f1(p.SagasPerS), d(p.Completed), d(p.Failed), d(p.Timeouts), d(p.Errors),
				f1(p.API.P50), f1(p.API.P95), f1(p.API.P99), f1(p.E2E.P50), f1(p.E2E.P95), f1(p.E2E.P99), f1(p.ToPublished.P99), f1(p.SMSPerS), strconv.FormatFloat(p.smsShare(), 'f', 2, 64),
				perOp(p.CPU["walletsvc"], p.Completed), perOp(p.CPU["notifier"], p.Completed), perOp(p.CPU["postgres"], p.Completed),
				perOp(p.CPU["broker"], p.Completed), perOp(p.CPU["bench"], p.Completed), perOp(p.cpuAll(), p.Completed), commits}, append(ws, f0(p.OthersCPU*100)+"%")...))
		}
		ts = append(ts, t)
	}
	if m := r.DTM; m != nil {
		t := table{title: fmt.Sprintf("Peer: DTM %s, sagas of two branches (no-op HTTP action + compensation served by the bench) submitted through dtmcli with WaitResult (closed loop); DTM's store in a Postgres database of its own; %d action and %d compensation calls answered",
			m.Version, m.ActionCalls, m.CompensateCalls),
			head: []string{"clients", "sagas/s", "ok", "err", "p50", "p95", "p99 ms", "CPU ms/saga dtm", "postgres", "bench", "DB commits/saga", "write tx/saga", "others CPU"}}
		for _, p := range m.Phases {
			commits, writes := "-", "-"
			if p.Completed > 0 {
				commits = f1(float64(p.DBCommits-p.Probes) / float64(p.Completed))
				if p.Writes != nil {
					writes = strconv.FormatFloat(float64(p.Writes.All())/float64(p.Completed), 'f', 2, 64)
				}
			}
			t.rows = append(t.rows, []string{strconv.Itoa(p.Clients), f1(p.SagasPerS), d(p.Completed), d(p.Errors), f1(p.Latency.P50), f1(p.Latency.P95), f1(p.Latency.P99),
				perOp(p.CPU["dtm"], p.Completed), perOp(p.CPU["postgres"], p.Completed), perOp(p.CPU["bench"], p.Completed), commits, writes, f0(p.OthersCPU*100) + "%"})
		}
		ts = append(ts, t)
	}
	if m := r.DTM; m != nil && len(m.Work) > 0 {
		t := table{title: fmt.Sprintf("Peer: DTM %s doing the deposit's business work (a charge the bench keeps in memory; the credit under DTM's branch barrier: balance, ledger and outbox rows in one statement on the wallet's own tables, in a database of its own); %s",
			m.Version, m.WorkCheck),
			head: []string{"clients", "sagas/s", "ok", "err", "p50", "p95", "p99 ms", "CPU ms/saga dtm", "postgres", "bench", "all", "DB commits/saga", "write tx/saga", "others CPU"}}
		for _, p := range m.Work {
			commits, writes := "-", "-"
			if p.Completed > 0 {
				commits = f1(float64(p.DBCommits-p.Probes) / float64(p.Completed))
				if p.Writes != nil {
					writes = strconv.FormatFloat(float64(p.Writes.All())/float64(p.Completed), 'f', 2, 64)
				}
			}
			t.rows = append(t.rows, []string{strconv.Itoa(p.Clients), f1(p.SagasPerS), d(p.Completed), d(p.Errors), f1(p.Latency.P50), f1(p.Latency.P95), f1(p.Latency.P99),
				perOp(p.CPU["dtm"], p.Completed), perOp(p.CPU["postgres"], p.Completed), perOp(p.CPU["bench"], p.Completed),
				perOp(p.CPU["dtm"]+p.CPU["postgres"]+p.CPU["bench"], p.Completed), commits, writes, f0(p.OthersCPU*100) + "%"})
		}
		ts = append(ts, t)
	}
	ts = append(ts, r.rowTables()...)
	ts = append(ts, statementTables(r.profiles())...)
	var extra [][]string
	if len(r.PeakRSS) > 0 {
		extra = append(extra, []string{"peak RSS (VmHWM) walletsvc", f1(r.PeakRSS["walletsvc"]) + " MiB"},
			[]string{"peak RSS (VmHWM) notifier", f1(r.PeakRSS["notifier"]) + " MiB"})
	}
	if m := r.DTM; m != nil && m.PeakRSSMiB > 0 {
		extra = append(extra, []string{"peak RSS (VmHWM) DTM server", f1(m.PeakRSSMiB) + " MiB"})
	}
	if n := r.NotifyDrain; n != nil {
		extra = append(extra, []string{"notifier draining the raw backlog (log sender, 8 queues)",
			fmt.Sprintf("%.1f SMS/s (%d SMS in %.1fs; CPU ms/SMS notifier %s postgres %s; %.1f DB commits/SMS; peak RSS %.1f MiB)",
				n.SMSPerS, n.SMS, n.Seconds, perOp(n.CPU["notifier-drain"], n.SMS), perOp(n.CPU["postgres"], n.SMS),
				float64(n.DBCommits)/float64(max(n.SMS, 1)), n.PeakRSSMiB)})
	}
	extra = append(extra, r.laneRows()...)
	if len(extra) > 0 {
		ts = append(ts, table{title: "Notifier and resources", head: []string{"what", "result"}, rows: extra})
	}
	if len(r.Targets) > 0 {
		t := table{title: "Targets", head: []string{"target", "want", "got", "reached"}}
		for _, g := range r.Targets {
			t.rows = append(t.rows, []string{g.What, g.Want, strconv.FormatFloat(g.Got, 'f', 2, 64), map[bool]string{true: "yes", false: "NO"}[g.Reached]})
		}
		ts = append(ts, t)
	}
	return ts
}

// definitions explain the columns; they are printed under the table and in the Markdown.
var definitions = []string{
	"sagas/s: sagas answered 200 with state completed within the phase, ÷ the phase's length; 202 = still running after the API's 10 s wait; failed = terminal but not completed.",
	"API pNN: client-side latency of the POST with ?wait=true (open loop: from the scheduled start, so queueing counts).",
	"commit→SMS: wallet_events.occurred_at (now() of the step's transaction, just before its commit) → notify.sms_log.sent_at (now() of the notifier's send transaction), for the events written during the phase, read after the phase's SMS have all arrived; →published: occurred_at → published_at (the relay).",
	"SMS/s: SMS log rows written during the phase ÷ its length; SMS ÷ events: that ÷ the phase's events ÷ its length (a transfer writes two events), below 1 when the notifier falls behind.",
	"CPU ms/saga: CPU time (/proc/PID/stat utime+stime) of each process from the phase's start to the end of its SMS drain ÷ completed sagas; postgres = the whole cluster (postmaster, live and exited backends); broker = the RocketMQ broker JVM; bench = this load generator, with the payment gateway and merchant stub it serves (the simulator's handler on its memory store, so the product's database holds nothing of theirs); all = the sum of the five.",
	"DB commits/saga: pg_stat_database.xact_commit of the product's database over the same span, less the bench's own probes, ÷ completed sagas: every transaction of walletsvc (API, saga engine, relay) and of the notifier (each autocommit statement counts as one); backends flush these counters up to ~1 s late. The probes (the span's opening snapshot, the drain polls, the latency query: bench_probe_tx in the JSON) run one at a time on one connection of their own, on the simple protocol and never pinged, so that each is exactly one transaction, and are counted by the bench.",
	"write tx/saga: committed transactions that wrote (got a transaction id), read from the WAL of the same span (pg_walinspect; the span is recorded during the phase and read after the run's last measured part, so that reading it perturbs no phase) and split by the tables each touched: saga = the wallet's and the saga engine's tables (the saga's own commits), relay = only wallet_events (marking published), notifier = the notify schema; ÷ completed sagas. read tx/saga = DB commits (the probes left out) − all write transactions: the product's read-only transactions (the API's reads, the relay's and the notifier's polls).",
	"others CPU: share of the machine's CPU capacity over the same span used by processes outside the stack (other sessions' builds and tests, kernel threads): the noise on this run; Postgres work of other databases on the same cluster is counted under postgres, not here.",
	"peak RSS: VmHWM of /proc/PID/status at the end of the product phases.",
	"DTM: the peer of the same run, DTM's server built from its module's source, with its defaults but for its ports and its log level (warn, as the product's binaries run here), its store on a database of its own of the same cluster; each client submits a saga of two branches (an action and a compensation each, no-op HTTP handlers of this load generator) through dtmcli with WaitResult (answered once the saga has ended) and a global id of its own, then the next. sagas/s, latency, CPU ms/saga (dtm = DTM's server process; postgres and bench as above, bench serving the branches), DB commits/saga (the bench's probes left out) and write tx/saga (every write transaction of DTM's database, from the WAL) are measured as for the product, the span ending when DTM has recorded the phase's branch outcomes (it writes them in batches after answering).",
	"DTM doing the wallet's work: on the same DTM server, sagas of two branches that do the deposit's business: charge (the bench answers from memory, idempotent by global id, as the product's gateway stub is) and credit (under DTM's branch barrier, whose row is written in the same transaction: ONE statement raises the balance and the event sequence, writes the ledger row and the outbox row, on the wallet's own tables and indexes: the wallet migrations in a database of its own, less the ledger's foreign key to sagas, which DTM has not). CPU all = dtm + postgres + bench (the business handlers); DB commits and write transactions count DTM's store and the business database; statements are the business database's. At the end the bench checks charges = balances = ledger sum and outbox rows = wallet seqs, without gaps.",
	"rows (what each saga writes): the WAL of the phase's span (pg_walinspect), per completed saga: heap records by table (inserted, updated not HOT, HOT updated, deleted, locked: a foreign key's check locks the row it points at, FOR KEY SHARE) and B-tree leaf inserts (index entries, counted on the index's table); rows written = inserted + updated + HOT + deleted; WAL bytes = all the cluster wrote over the span. For the product: walletsvc, relay and notifier together; for DTM: its store and the business database.",
	"statements: pg_stat_statements of the phase's database over the same span (reset at the phase's start): each normalized statement's calls and total execution time (from start to end inside the server, so lock waits and CPU queueing count; planning not included; BEGIN and COMMIT are statements too) ÷ completed sagas, costliest first; share = of the time the database spent executing statements; the bench's own probes, marked by a comment, are left out; [tables] = the tables the statement names. The verdict names the costliest.",
}

// profiled is a phase's statement profile, as the statement tables show it.
type profiled struct {
	label     string
	completed int64
	st        *Statements
}

// label names a product phase: kind × clients (or its open-loop rate), and its setting.
func (p Phase) label() string {
	l := p.Kind + " × " + strconv.Itoa(p.Clients)
	if p.OpenRate > 0 {
		l = p.Kind + " open " + f1(p.OpenRate) + "/s"
	}
	if p.Setting != "" {
		l += " (" + p.Setting + ")"
	}
	return l
}

// profiles are the phases with a statement profile, in the order they ran.
func (r *Results) profiles() []profiled {
	var out []profiled
	rows := append([]Phase(nil), r.Phases...)
	if r.HalfLoad != nil {
		rows = append(rows, *r.HalfLoad)
	}
	for _, p := range rows {
		if p.Statements != nil {
			out = append(out, profiled{label: p.label(), completed: p.Completed, st: p.Statements})
		}
	}
	if r.DTM != nil {
		for _, p := range append(slices.Clone(r.DTM.Phases), r.DTM.Work...) {
			if p.Statements != nil {
				out = append(out, profiled{label: p.label(), completed: p.Completed, st: p.Statements})
			}
		}
	}
	return out
}

// topStatements is how many statements per phase the statement table shows (the JSON has
// them all).
const topStatements = 5

// statementTables are the costliest statements of each profiled phase, per saga, and the
// verdict of each.
func statementTables(ps []profiled) []table {
	if len(ps) == 0 {
		return nil
	}
	top := table{title: fmt.Sprintf("Where the database time goes: the %d costliest statements of each phase (pg_stat_statements, per completed saga; the bench's own probes left out)", topStatements),
		head: []string{"phase", "#", "calls/saga", "exec ms/saga", "share", "µs/call", "statement"}}
	verdicts := table{title: "Verdict per phase", head: []string{"phase", "verdict"}}
	for _, p := range ps {
		list, total := p.st.perSaga(p.completed)
		for i, c := range list[:min(len(list), topStatements)] {
			top.rows = append(top.rows, []string{p.label, strconv.Itoa(i + 1), strconv.FormatFloat(c.CallsPerSaga, 'f', 2, 64),
				strconv.FormatFloat(c.MSPerSaga, 'f', 3, 64), f0(c.Share*100) + "%", f1(c.ExecMS * 1000 / float64(c.Calls)), describe(c.Query, 80)})
		}
		if len(list) > topStatements {
			rest, calls := 0.0, 0.0
			for _, c := range list[topStatements:] {
				rest, calls = rest+c.MSPerSaga, calls+c.CallsPerSaga
			}
			top.rows = append(top.rows, []string{p.label, "", strconv.FormatFloat(calls, 'f', 2, 64), strconv.FormatFloat(rest, 'f', 3, 64),
				f0(rest/max(total, 1e-9)*100) + "%", "", fmt.Sprintf("the %d others", len(list)-topStatements)})
		}
		verdicts.rows = append(verdicts.rows, []string{p.label, p.st.verdict(p.completed)})
	}
	return []table{top, verdicts}
}

func settingName(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

func printTable(w io.Writer, r *Results) {
	m := r.Machine
	fmt.Fprintf(w, "\nwalletsaga bench %s — %d CPUs (%s), %s GiB, %s, Postgres %s, RocketMQ %s, %s; %.0fs\n",
		r.Started.UTC().Format(time.RFC3339), m.CPUs, m.CPUModel, m.MemGiB, m.Go, m.Postgres, m.RocketMQ, m.Java, r.Seconds)
	for _, t := range r.tables() {
		fmt.Fprintf(w, "\n%s\n", t.title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  "+strings.Join(t.head, "\t")+"\t")
		for _, row := range t.rows {
			fmt.Fprintln(tw, "  "+strings.Join(row, "\t")+"\t")
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	if len(r.Phases) > 0 || r.DTM != nil {
		for _, d := range definitions {
			fmt.Fprintln(w, "  "+d)
		}
		fmt.Fprintln(w)
	}
	for _, rt := range r.Ratios {
		fmt.Fprintf(w, "ratio %s=%.2f\n  = %s\n", rt.Name, rt.Value, rt.Definition)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	for _, p := range r.Profiles {
		fmt.Fprintln(w, "profile: go tool pprof -top", p)
	}
}

func (b *bench) write() error {
	r := b.res
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	base := filepath.Join(b.cfg.OutDir, b.ts)
	if err := os.WriteFile(base+".json", append(js, '\n'), 0o600); err != nil {
		return err
	}
	var sb strings.Builder
	m := r.Machine
	fmt.Fprintf(&sb, "# walletsaga bench %s\n\n", r.Started.UTC().Format(time.RFC3339))
	fmt.Fprintf(&sb, "## Machine\n\n| | |\n|---|---|\n| CPUs (nproc) | %d |\n| CPU model | %s |\n| memory | %s GiB |\n| kernel | %s |\n| Go | %s |\n| Java | %s |\n| PostgreSQL | %s |\n| RocketMQ | %s |\n| load average at start / end | %s / %s |\n| run took | %.0f s |\n\n",
		m.CPUs, m.CPUModel, m.MemGiB, m.Kernel, m.Go, m.Java, m.Postgres, m.RocketMQ, m.LoadAvg, m.LoadEnd, r.Seconds)
	sb.WriteString("Everything (Postgres, the RocketMQ name server and broker, walletsvc, notifier and this load generator) shares these CPUs.\n\n")
	for _, t := range r.tables() {
		fmt.Fprintf(&sb, "## %s\n\n| %s |\n|%s\n", t.title, strings.Join(t.head, " | "), strings.Repeat("---|", len(t.head)))
		for _, row := range t.rows {
			fmt.Fprintf(&sb, "| %s |\n", strings.Join(mdCells(row), " | "))
		}
		sb.WriteString("\n")
	}
	if len(r.Phases) > 0 || r.DTM != nil {
		sb.WriteString("Columns:\n\n")
		for _, d := range definitions {
			fmt.Fprintf(&sb, "- %s\n", d)
		}
		sb.WriteString("\n")
	}
	sb.WriteString("## Ratios\n\n```\n")
	for _, rt := range r.Ratios {
		fmt.Fprintf(&sb, "ratio %s=%.2f\n", rt.Name, rt.Value)
	}
	sb.WriteString("```\n\n")
	for _, rt := range r.Ratios {
		fmt.Fprintf(&sb, "- `%s` = %s.\n", rt.Name, rt.Definition)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&sb, "- %s\n", n)
	}
	for _, p := range r.Profiles {
		fmt.Fprintf(&sb, "- CPU profile of the load generator: `go tool pprof -top %s`\n", p)
	}
	if err := os.WriteFile(base+".md", []byte(sb.String()), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: wrote %s.json and %s.md\n", base, base)
	return nil
}

// mdCells escapes the cells of a Markdown table row: a statement's text may hold a pipe.
func mdCells(row []string) []string {
	out := make([]string, len(row))
	for i, c := range row {
		out[i] = strings.ReplaceAll(c, "|", `\|`)
	}
	return out
}

// rowsOf is a phase's rows from the WAL, for the row tables.
type rowsOf struct {
	label     string
	completed int64
	rows      *RowWrites
}

// rowTables are what each saga wrote, from the WAL: a line per phase, then table by table
// for the deposit at 8 clients and DTM doing the wallet's work at 8 clients.
func (r *Results) rowTables() []table {
	var all []rowsOf
	for _, p := range r.Phases {
		all = append(all, rowsOf{p.label(), p.Completed, p.Rows})
	}
	if r.HalfLoad != nil {
		all = append(all, rowsOf{r.HalfLoad.label(), r.HalfLoad.Completed, r.HalfLoad.Rows})
	}
	if r.DTM != nil {
		for _, p := range append(slices.Clone(r.DTM.Phases), r.DTM.Work...) {
			all = append(all, rowsOf{p.label(), p.Completed, p.Rows})
		}
	}
	all = slices.DeleteFunc(all, func(o rowsOf) bool { return o.rows == nil || o.completed == 0 })
	if len(all) == 0 {
		return nil
	}
	per := func(v int64, n int64) string { return f1(float64(v) / float64(n)) }
	sum := table{title: "What each saga writes (from the WAL, per completed saga; walletsvc, notifier and relay together for the product)",
		head: []string{"phase", "rows written", "inserted", "updated", "HOT updated", "deleted", "locked (FK checks)", "index entries", "WAL bytes"}}
	for _, o := range all {
		t := o.rows.Total()
		sum.rows = append(sum.rows, []string{o.label, per(t.Rows(), o.completed), per(t.Inserted, o.completed), per(t.Updated, o.completed), per(t.HOT, o.completed),
			per(t.Deleted, o.completed), per(t.Locked, o.completed), per(t.IndexEntries, o.completed), f0(float64(o.rows.WALBytes) / float64(o.completed))})
	}
	out := []table{sum}
	for _, want := range []string{fmt.Sprintf("deposit × %d", equalWorkClients), fmt.Sprintf("DTM wallet work × %d", equalWorkClients)} {
		i := slices.IndexFunc(all, func(o rowsOf) bool { return o.label == want })
		if i < 0 {
			continue
		}
		o := all[i]
		t := table{title: "Table by table, " + want + " (per completed saga)", head: []string{"table", "inserted", "updated", "HOT updated", "deleted", "locked", "index entries"}}
		for _, w := range o.rows.Tables {
			t.rows = append(t.rows, []string{w.Table, per(w.Inserted, o.completed), per(w.Updated, o.completed), per(w.HOT, o.completed),
				per(w.Deleted, o.completed), per(w.Locked, o.completed), per(w.IndexEntries, o.completed)})
		}
		out = append(out, t)
	}
	return out
}

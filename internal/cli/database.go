// The database settings: DATABASE_URL-like flags, their checks, and the pool a service opens on a durable server.

package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/redact"
)

// DatabaseURL binds a PostgreSQL URL setting named env. It is read from --env on the command
// line, else from the variable env or the file env_FILE (--env-file), else from the variable
// fallback or the file fallback_FILE (when fallback is not empty: the notifier's
// NOTIFY_DATABASE_URL falls back to DATABASE_URL), else, in dev, devDef. A URL that holds a
// password is refused on the command line, where any user of the host can read it (ps): the
// variable or the file are the ways. When required, production needs it set.
func (f *Flags) DatabaseURL(p *string, env, fallback, devDef string, required bool, usage string) {
	name, fileEnv := FlagName(env), env+"_FILE"
	var fromFlag, file string
	f.required[env] = required
	if f.mode == Dev {
		f.defaults[env] = devDef
	}
	where := describeDevDefault(devDef)
	if fallback != "" {
		where = fallback + " (or " + fallback + "_FILE), then " + where
	}
	f.fs.StringVar(&fromFlag, name, "", usage+"; default "+where+"; a URL holding a password only from the environment or the file (env "+env+")")
	f.String(&file, fileEnv, "", "file holding "+env+" (a URL with its password)")
	f.after = append(f.after, func() {
		onCommandLine := false
		f.fs.Visit(func(fl *flag.Flag) { onCommandLine = onCommandLine || fl.Name == name })
		switch {
		case onCommandLine:
			*p = fromFlag
			if URLPassword(fromFlag) != "" {
				f.problems.Addf(env, "a URL holding a password is not accepted on the command line, where any user of the host can read it (ps); set %s or %s", env, fileEnv)
			}
		default:
			*p = f.urlFrom(env, file)
			if *p == "" && fallback != "" {
				*p = f.urlFrom(fallback, f.getenv(fallback+"_FILE"))
			}
			if *p == "" && f.mode == Dev {
				*p = devDef
			}
		}
		if *p == "" && required && f.requires(env) {
			also := ""
			if fallback != "" {
				also = fmt.Sprintf(", or %s or %s_FILE", fallback, fallback)
			}
			f.problems.Addf(env, "required (set %s or %s%s)", env, fileEnv, also)
		}
	})
}

// urlFrom returns the variable env's value or the content of file (env_FILE), refusing both.
func (f *Flags) urlFrom(env, file string) string {
	v := f.getenv(env)
	if file == "" {
		return v
	}
	if v != "" {
		f.problems.Addf(env, "set both as %s and as %s_FILE: set one", env, env)
		return v
	}
	v, err := ReadSecret(env+"_FILE", "", file)
	if err != nil {
		f.problems = append(f.problems, err.Error())
	}
	return v
}

// URLPassword returns the password a URL holds, in its user part or as its password
// parameter ("" for none, or for a URL that does not parse). A database URL is read as pgx
// reads it (pg.ParseURL: several hosts), any other as net/url does.
func URLPassword(v string) string {
	if u, err := pg.ParseURL(v); err == nil {
		return u.Password()
	}
	u, err := url.Parse(v)
	if err != nil {
		return ""
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		return pw
	}
	return u.Query().Get("password")
}

// UnverifiedDatabaseTLSEnv names the override of production's rule that a database reached
// over the network verifies its server (sslmode=verify-full): its value is the operator's
// reason to take sslmode=require or verify-ca instead, logged at every start.
const UnverifiedDatabaseTLSEnv = "ALLOW_UNVERIFIED_DATABASE_TLS"

// verifiedSSLMode is the sslmode under which pgx checks who it talks to: the server's
// certificate against sslrootcert (else the system's roots) and the name in it against the
// host the URL names. Under any other a server that is not the database can pose as it, and
// read what the services send it, the password included.
const verifiedSSLMode = "verify-full"

// unverifiedSSLModes are the sslmode values under which pgx never talks to the server in
// plain text but does not verify it either (what each leaves unchecked; require with
// sslrootcert checks the certificate as verify-ca does, never the name): production takes
// them only with UnverifiedDatabaseTLSEnv. The default, prefer, and allow and disable are
// never taken: they fall back to plain text whenever the server (or whoever is in the
// middle) declines TLS.
var unverifiedSSLModes = map[string]string{
	"require":   "encrypts but checks neither the server's certificate nor its name, so whoever sits on the path can pose as the server",
	"verify-ca": "checks that the server's certificate comes from the CA of sslrootcert but not that it was made for this host, so any server holding a certificate of that CA can pose as it",
}

// writableSessionAttrs are the target_session_attrs under which pgx connects only to a
// server that takes writes: read-write (transaction_read_only off) and primary (not in
// recovery).
var writableSessionAttrs = []string{"read-write", "primary"}

// CheckPostgresURL validates a database URL named field, its parameters read as pgx reads
// them (pg.URL.Param: the last of a parameter given twice). It may name several hosts (the
// nodes of a cluster with a standby), and then needs target_session_attrs=read-write (or
// primary) in the URL itself, so that the service connects to the primary only; no URL may
// ask for a standby. In production a database reached over the network (any host that is not
// loopback or a Unix socket) must be reached with sslmode=verify-full, said in the URL
// itself, or, when unverifiedTLS (UnverifiedDatabaseTLSEnv) states the reason, with an
// sslmode of unverifiedSSLModes; that override is refused where the URL does not need it.
// The URL's password must not be one the repository documents.
func (p *Problems) CheckPostgresURL(mode Mode, field, v, unverifiedTLS string) {
	if v == "" {
		return // a required setting that is missing is reported as such
	}
	u, err := pg.ParseURL(v)
	if err != nil || !slices.ContainsFunc(u.Hosts, func(h string) bool { return h != "" }) {
		p.Addf(field, "must be a postgres:// URL with a host, got %q", redact.URL(v))
		return
	}
	tsa := u.Param("target_session_attrs")
	hosts := len(u.Hosts)
	if h := u.Param("host"); h != "" {
		hosts = len(strings.Split(h, ",")) // the parameter overrides the host list
	}
	switch {
	case tsa != "" && tsa != "any" && !slices.Contains(writableSessionAttrs, tsa):
		p.Addf(field, "target_session_attrs=%s lets pgx connect to a standby, which refuses every write: use read-write", tsa)
	case hosts > 1 && !slices.Contains(writableSessionAttrs, tsa):
		p.Addf(field, "names %d hosts, so it needs target_session_attrs=read-write in the URL: without it pgx connects to the first that answers, which may be a standby (it refuses every write)", hosts)
	}
	if mode != Production {
		return
	}
	if IsDocumentedSecret(u.Password()) {
		p.Addf(field, "holds a password the repository documents (the dev stack's); production needs one of its own")
	}
	remote, sslmode := remoteHosts(u), u.Param("sslmode")
	_, unverified := unverifiedSSLModes[sslmode]
	switch {
	case len(remote) == 0:
		if unverifiedTLS != "" {
			p.Addf(UnverifiedDatabaseTLSEnv, "is set, but %s reaches no host over the network (loopback or a Unix socket only): leave it unset", field)
		}
	case sslmode == verifiedSSLMode:
		if unverifiedTLS != "" {
			p.Addf(UnverifiedDatabaseTLSEnv, "is set, but %s verifies its server (sslmode=verify-full): leave it unset", field)
		}
	case unverified && unverifiedTLS == "":
		p.Addf(field, "reaches %s over the network with sslmode=%s, which %s and read everything the service sends, the password included: production needs sslmode=verify-full in the URL, with sslrootcert=<the PEM file of the CA that signed the server's certificate> (or sslrootcert=system for a public CA); to run unverified anyway, set %s to the reason in words",
			strings.Join(remote, ", "), sslmode, unverifiedSSLModes[sslmode], UnverifiedDatabaseTLSEnv)
	case !unverified:
		got := "no sslmode (pgx then takes PGSSLMODE, else prefer, which falls back to plain text)"
		if sslmode != "" {
			got = "sslmode=" + sslmode
		}
		p.Addf(field, "reaches %s over the network, so production needs sslmode=verify-full in the URL (encrypted, the server's certificate checked against sslrootcert and its name against the host); got %s",
			strings.Join(remote, ", "), got)
	}
}

// unverifiedLink returns the hosts of database URL v that are reached over the network and
// its sslmode, when that sslmode encrypts without verifying the server (unverifiedSSLModes);
// nil when v reaches none so, or does not parse.
func unverifiedLink(v string) (remote []string, sslmode string) {
	u, err := pg.ParseURL(v)
	if err != nil {
		return nil, ""
	}
	sslmode = u.Param("sslmode")
	if _, ok := unverifiedSSLModes[sslmode]; !ok {
		return nil, ""
	}
	if remote = remoteHosts(u); len(remote) == 0 {
		return nil, ""
	}
	return remote, sslmode
}

// LogDatabaseTLS says at start that the database server is not verified, when production
// runs so, with the reason UnverifiedDatabaseTLS gives (CheckPostgresURL refuses it
// without). Each binary calls it before its subcommand opens the database.
func (s Service) LogDatabaseTLS(log *slog.Logger) {
	remote, sslmode := unverifiedLink(s.DatabaseURL)
	if s.Mode != Production || remote == nil {
		return
	}
	log.Warn("the database server is not verified: sslmode="+sslmode+" "+unverifiedSSLModes[sslmode]+" and read everything the service sends, the password included; running so as "+UnverifiedDatabaseTLSEnv+" says",
		"database", redact.URL(s.DatabaseURL), "hosts", strings.Join(remote, ","), "sslmode", sslmode, "reason", s.UnverifiedDatabaseTLS)
}

// remoteHosts returns the hosts of a database URL that are reached over the network: those
// of its host list and of each host parameter (pgx takes the last), less loopback addresses,
// localhost and Unix socket directories.
func remoteHosts(u pg.URL) []string {
	hosts := u.Names()
	for _, h := range u.Params("host") {
		hosts = append(hosts, strings.Split(h, ",")...)
	}
	var remote []string
	for _, h := range hosts {
		if h == "" || strings.HasPrefix(h, "/") || isLoopback(h) {
			continue
		}
		remote = append(remote, h)
	}
	return remote
}

// OpenDurablePool opens a service's pool on url with o, then reads the server's durability
// settings and applies RequireDurable to them with override; on any failure the pool is
// closed and the error returned.
func OpenDurablePool(ctx context.Context, mode Mode, log *slog.Logger, url string, o pg.Options, override string) (*pgxpool.Pool, error) {
	pool, err := pg.Open(ctx, url, o)
	if err != nil {
		return nil, err
	}
	d, err := pg.ReadDurability(ctx, pool)
	if err == nil {
		err = RequireDurable(mode, log, redact.URL(url), d.Unsafe(), override)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// RequireDurable decides whether a binary may run on a database that reports unsafe (the
// settings under which an acknowledged commit can vanish in a crash, pg.Durability.Unsafe):
// in production it refuses, naming them, unless override states a reason, which is then
// logged as a warning at every start; in dev it only warns.
func RequireDurable(mode Mode, log *slog.Logger, database string, unsafe []string, override string) error {
	if len(unsafe) == 0 {
		return nil
	}
	what := strings.Join(unsafe, "; ")
	switch {
	case mode == Dev:
		log.Warn("the database can lose acknowledged commits in a crash (fine for the dev stack, never for money)", "database", database, "unsafe", what)
		return nil
	case override != "":
		log.Warn("running on a database that can lose acknowledged commits in a crash, as ALLOW_UNSAFE_DURABILITY says", "database", database, "unsafe", what, "reason", override)
		return nil
	}
	return fmt.Errorf("refusing to start: the database %s can lose commits it acknowledged in a crash (%s): a saga could charge a customer and then vanish, or messages be acknowledged that were never kept. Fix the server's settings, or set ALLOW_UNSAFE_DURABILITY to the reason to run anyway", database, what)
}

package pg

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Args are a statement's named arguments (@name in its sql/*.sql file), checked strictly as
// pgx.StrictNamedArgs are (a name the statement uses and Args lacks, or one it has and the
// statement does not use, is an error), but rewritten to positional parameters ($1, …) once
// per statement text instead of at every call: pgx.StrictNamedArgs lexes the whole text on
// each call, tens of microseconds for the saga's statements, which a saga pays several times.
//
// Pass Args as the only argument after the SQL, as pgx.StrictNamedArgs: to Exec, Query,
// QueryRow, or a pgx.Batch's Queue.
type Args map[string]any

// RewriteQuery implements pgx.QueryRewriter.
func (a Args) RewriteQuery(_ context.Context, _ *pgx.Conn, sql string, _ []any) (string, []any, error) {
	p, err := positionalOf(sql)
	if err != nil {
		return "", nil, err
	}
	out := make([]any, len(p.names))
	for i, n := range p.names {
		v, ok := a[n]
		if !ok {
			return "", nil, fmt.Errorf("argument %s found in the statement but not in Args", n)
		}
		out[i] = v
	}
	if len(a) != len(p.names) {
		for n := range a {
			if !slices.Contains(p.names, n) {
				return "", nil, fmt.Errorf("argument %s in Args but not in the statement", n)
			}
		}
	}
	return p.sql, out, nil
}

// positional is a statement's text with $n for each name, and the name of each $n.
type positional struct {
	sql   string
	names []string
}

// positionals holds each statement text's positional form (a program has a fixed set).
var positionals sync.Map // string → positional

// candidateName is what may be a named argument: pgx's own lexer decides which are (one in
// a comment or a string literal is not).
var candidateName = regexp.MustCompile(`@([a-zA-Z_][a-zA-Z0-9_]*)`)

// positionalOf rewrites sql once, with pgx's lexer: each candidate name is bound to its own
// index, and the order pgx gives them back is the order of the $n.
func positionalOf(sql string) (positional, error) {
	if p, ok := positionals.Load(sql); ok {
		return p.(positional), nil //nolint:forcetypeassert // only positionals are stored
	}
	probe := pgx.NamedArgs{}
	var cands []string
	for _, m := range candidateName.FindAllStringSubmatch(sql, -1) {
		if _, seen := probe[m[1]]; !seen {
			probe[m[1]] = len(cands)
			cands = append(cands, m[1])
		}
	}
	text, idx, err := probe.RewriteQuery(context.Background(), nil, sql, nil)
	if err != nil {
		return positional{}, err
	}
	p := positional{sql: text, names: make([]string, len(idx))}
	for i, v := range idx {
		k, ok := v.(int)
		if !ok {
			return positional{}, fmt.Errorf("named arguments of a statement: $%d is not one of its names", i+1)
		}
		p.names[i] = cands[k]
	}
	positionals.Store(sql, p)
	return p, nil
}

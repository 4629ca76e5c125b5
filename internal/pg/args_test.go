package pg

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Args binds what pgx.StrictNamedArgs binds, in the same places, and refuses what it refuses.
func TestArgsRewriteAsStrictNamedArgsDo(t *testing.T) {
	t.Parallel()
	const sql = `-- @not_an_argument in a comment
SELECT @b::bigint, @a, '@literal', @b, x FROM t WHERE y = @c /* @nor_this */`
	args := map[string]any{"a": 1, "b": "two", "c": 3.0}
	want, wantArgs, err := pgx.StrictNamedArgs(args).RewriteQuery(context.Background(), nil, sql, nil)
	require.NoError(t, err)
	got, gotArgs, err := Args(args).RewriteQuery(context.Background(), nil, sql, nil)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, wantArgs, gotArgs)
	require.Equal(t, []any{"two", 1, 3.0}, gotArgs)

	_, _, err = Args{"a": 1, "b": 2}.RewriteQuery(context.Background(), nil, sql, nil)
	require.ErrorContains(t, err, "argument c found in the statement but not in Args")
	_, _, err = Args{"a": 1, "b": 2, "c": 3, "d": 4}.RewriteQuery(context.Background(), nil, sql, nil)
	require.ErrorContains(t, err, "argument d in Args but not in the statement")
	_, _, err = pgx.StrictNamedArgs{"a": 1, "b": 2, "c": 3, "d": 4}.RewriteQuery(context.Background(), nil, sql, nil)
	require.Error(t, err, "pgx refuses the extra name too")
}

// Every statement of the repository's sql/ files rewrites as pgx rewrites it.
func TestEveryStatementFileRewritesAsPgxDoes(t *testing.T) {
	t.Parallel()
	n := 0
	err := filepath.WalkDir(argsRepoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "third_party" || d.Name() == ".git" || d.Name() == ".run") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".sql") || filepath.Base(filepath.Dir(path)) != "sql" {
			return nil
		}
		b, err := os.ReadFile(path) //nolint:gosec // G304: the repository's own files
		if err != nil {
			return err
		}
		p, err := positionalOf(string(b))
		require.NoError(t, err, path)
		args := namedArgsOf(p.names)
		want, _, err := pgx.StrictNamedArgs(args).RewriteQuery(context.Background(), nil, string(b), nil)
		require.NoError(t, err, path)
		got, gotArgs, err := Args(args).RewriteQuery(context.Background(), nil, string(b), nil)
		require.NoError(t, err, path)
		require.Equal(t, want, got, path)
		for i, a := range gotArgs {
			require.Equal(t, p.names[i], a, "%s: $%d", path, i+1)
		}
		n++
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, n, 50, "the statement files were found")
}

// argsRepoRoot is the repository, from this package's directory.
const argsRepoRoot = "../.."

// namedArgsOf binds each name to itself.
func namedArgsOf(names []string) map[string]any {
	m := make(map[string]any, len(names))
	for _, n := range names {
		m[n] = n
	}
	return m
}

func BenchmarkNamedArgs(b *testing.B) {
	sql, err := os.ReadFile(filepath.Join(argsRepoRoot, "internal", "saga", "sql", "update_saga.sql"))
	if err != nil {
		b.Fatal(err)
	}
	p, err := positionalOf(string(sql))
	if err != nil {
		b.Fatal(err)
	}
	args := namedArgsOf(p.names)
	b.Run("pgx.StrictNamedArgs", func(b *testing.B) {
		for b.Loop() {
			_, _, _ = pgx.StrictNamedArgs(args).RewriteQuery(context.Background(), nil, string(sql), nil)
		}
	})
	b.Run("pg.Args", func(b *testing.B) {
		s := string(sql)
		for b.Loop() {
			_, _, _ = Args(args).RewriteQuery(context.Background(), nil, s, nil)
		}
	})
}

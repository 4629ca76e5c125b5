package pg_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../.."

// sqlStatement matches a string that is an SQL statement: one that starts (after blanks,
// opening parentheses and -- comments) with one of these keywords, upper case, as the
// repository writes SQL (WITH as a CTE's, not an option list's "WITH (FORCE)").
var sqlStatement = regexp.MustCompile(`^(?:\s|\(|--[^\n]*\n)*(?:(?:SELECT|INSERT|UPDATE|DELETE|MERGE)\s|WITH\s+[A-Za-z_])`)

// statementsInGo are the SQL statement literals the product's Go may hold, each with why it
// is not a file in its package's sql/: "path:declaration" (the function, or the const or var
// it is in).
var statementsInGo = map[string]string{
	// List's WHERE holds only the filters given, so that each filter's plan reads its index
	// (a catch-all of every filter would let a generic plan walk every saga): the statement
	// is built per call.
	"internal/saga/store.go:listSQL": "dynamic WHERE",
}

// skippedDirs are not scanned: third_party is vendored code; the rest are not the product
// but what tests and measures it, and like the tests they keep their own SQL beside their
// code: internal/testutil is test support (no product code may import it, a depguard rule),
// bench the benchmarks and chaos the chaos run (both read the tables to measure, and bench
// has tables of its own).
var skippedDirs = []string{"third_party", "internal/testutil", "bench", "chaos"}

// Every statement of the product is a file in its package's sql/ directory, not a string in
// its Go: no Go file but a test holds a string that starts like an SQL statement, except the
// ones statementsInGo names, each of which does.
func TestNoSQLStatementsInGo(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	found := map[string]bool{}
	scanned := 0
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || slices.Contains(skippedDirs, rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		scanned++
		for _, decl := range f.Decls {
			where := rel + ":" + declName(decl)
			ast.Inspect(decl, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				if !sqlStatement.MatchString(s) {
					return true
				}
				if _, ok := statementsInGo[where]; ok {
					found[where] = true
					return true
				}
				t.Errorf("%s (%s): an SQL statement in Go; put it in a file of the package's sql/ directory: %.60q",
					fset.Position(lit.Pos()), where, s)
				return true
			})
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, scanned, 100, "the repository's Go files are scanned")
	for where := range statementsInGo {
		require.Truef(t, found[where], "%s is allowed an SQL statement in Go, but holds none: take it off statementsInGo", where)
	}
	require.True(t, sqlStatement.MatchString("\n-- a comment\nWITH x AS (SELECT 1) SELECT * FROM x"), "the scan finds a statement after a comment")
	require.False(t, sqlStatement.MatchString("Selected 3 rows"), "the scan leaves prose alone")
	require.False(t, sqlStatement.MatchString(" WITH (FORCE)"), "the scan leaves an option list alone")
}

// declName names a top-level declaration: a function by its name, a const or var group by
// its first name.
func declName(decl ast.Decl) string {
	switch d := decl.(type) {
	case *ast.FuncDecl:
		return d.Name.Name
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			if v, ok := spec.(*ast.ValueSpec); ok && len(v.Names) > 0 {
				return v.Names[0].Name
			}
		}
	}
	return ""
}

// embedSQL matches a go:embed directive of one file of the package's sql/ directory.
var embedSQL = regexp.MustCompile(`^//go:embed (sql/[^ /]+\.sql)$`)

// Every file in a sql/ directory of a package is a statement the package runs: its Go embeds
// it into a string variable of its own (//go:embed sql/<name>.sql) and uses that variable.
func TestEverySQLFileIsUsed(t *testing.T) {
	t.Parallel()
	var dirs []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != repoRoot || d.Name() == "third_party") {
			return filepath.SkipDir
		}
		if d.IsDir() && d.Name() == "sql" {
			dirs = append(dirs, filepath.Dir(path))
		}
		return nil
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(dirs), 5, "the packages with statements are found")
	files := 0
	for _, pkg := range dirs {
		statements, err := filepath.Glob(filepath.Join(pkg, "sql", "*"))
		require.NoError(t, err)
		embedded := embeddedSQL(t, pkg)
		for _, path := range statements {
			name := "sql/" + filepath.Base(path)
			files++
			require.Truef(t, strings.HasSuffix(name, ".sql"), "%s: only .sql files belong in sql/", path)
			v, ok := embedded[name]
			require.Truef(t, ok, "%s: no //go:embed %s into a string variable in the package's Go", path, name)
			require.Truef(t, uses(t, pkg, v), "%s: embedded into %s, which nothing uses", path, v)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Truef(t, strings.HasPrefix(string(b), "-- "), "%s: starts with a comment saying what it does, its arguments and what it locks", path)
		}
	}
	require.Greater(t, files, 50, "the statements are found")
}

// embeddedSQL returns, for each sql/ file the non-test Go of pkg embeds, the variable it
// embeds it into.
func embeddedSQL(t *testing.T, pkg string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range parseDir(t, pkg, parser.ParseComments) {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				v := spec.(*ast.ValueSpec) //nolint:forcetypeassert // the specs of a var declaration
				doc := v.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				if doc == nil {
					continue
				}
				for _, c := range doc.List {
					if m := embedSQL.FindStringSubmatch(c.Text); m != nil {
						require.Lenf(t, v.Names, 1, "%s: one variable per embedded statement", m[1])
						out[m[1]] = v.Names[0].Name
					}
				}
			}
		}
	}
	return out
}

// uses reports whether the non-test Go of pkg names the identifier v anywhere but in its
// declaration.
func uses(t *testing.T, pkg, v string) bool {
	t.Helper()
	n := 0
	for _, f := range parseDir(t, pkg, 0) {
		ast.Inspect(f, func(node ast.Node) bool {
			if id, ok := node.(*ast.Ident); ok && id.Name == v {
				n++
			}
			return true
		})
	}
	return n > 1
}

// parseDir parses the non-test Go files of the directory pkg.
func parseDir(t *testing.T, pkg string, mode parser.Mode) []*ast.File {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(pkg, "*.go"))
	require.NoError(t, err)
	fset := token.NewFileSet()
	var out []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, mode)
		require.NoError(t, err)
		out = append(out, f)
	}
	require.NotEmptyf(t, out, "%s: a sql/ directory beside no Go", pkg)
	return out
}

package saga

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A saga's first commit and its later ones write the history with the same text: the part of
// insert_saga.sql and update_saga.sql after the saga's own CTE.
func TestTheInsertAndTheUpdateWriteTheSameHistory(t *testing.T) {
	t.Parallel()
	history := func(sql string) string {
		i := strings.Index(sql, "\n, r AS (")
		require.Positive(t, i, "the history's CTE r follows the saga's")
		return sql[i:]
	}
	require.Equal(t, history(insertSagaSQL), history(updateSagaSQL))
	require.Contains(t, history(insertSagaSQL), "INSERT INTO saga_steps")
}

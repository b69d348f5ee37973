package migrate_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/pgtest"
)

// queen.txid_offset_rows is inlined into the statement that reads it, so
// that the ack's cached plan covers it: a function the planner cannot
// inline (not a single SELECT, STRICT, VOLATILE, with a SET clause, or a
// scalar) is parsed and planned again at every call, which cost a third of
// every ack.
func TestTxidOffsetRowsIsInlinedIntoTheStatementThatReadsIt(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	rows, err := pool.Query(t.Context(), `EXPLAIN SELECT r.i, r.off FROM queen.txid_offset_rows($1, 0, 100, $2) r`,
		uuid.New(), []string{"a", "b"})
	require.NoError(t, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	text := strings.Join(plan, "\n")
	require.NotContains(t, text, "txid_offset_rows", "the plan calls the function:\n%s", text)
	require.Contains(t, text, "log_segments", "the plan does not read the segments itself:\n%s", text)
}

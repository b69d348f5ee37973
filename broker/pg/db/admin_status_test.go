package db_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPingSaysWhetherTheDatabaseAnswers(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.db.Ping(f.ctx))
	pool := f.db.PoolStats()
	require.GreaterOrEqual(t, pool.TotalConns, int64(1), "the ping's connection stays in the pool")
	require.Equal(t, pool.TotalConns, pool.IdleConns, "and is idle again")
	f.pool.Close()
	require.Error(t, f.db.Ping(f.ctx))
}

func TestPostgresStatsReadEveryListOfTheBrokersSchemasOnly(t *testing.T) {
	f := newFixture(t)
	var current string
	f.scan(`SELECT current_database()`, nil, &current)

	database, stats, err := f.db.PostgresStats(f.ctx)
	require.NoError(t, err)
	require.Equal(t, current, database)
	for _, name := range []string{"databaseCache", "tableCache", "indexCache", "cacheSummary", "deadTuples", "hotUpdates",
		"autovacuumStatus", "activeQueries", "bufferConfig", "tableSizes"} {
		require.Contains(t, stats, name)
	}
	require.Len(t, stats["databaseCache"], 1)
	require.NotEmpty(t, stats["tableSizes"])
	for _, row := range stats["tableSizes"] {
		table := row["table"].(string)
		require.True(t, strings.HasPrefix(table, "queen.") || strings.HasPrefix(table, "queen_streams."), table)
	}
	for _, row := range stats["tableCache"] {
		require.Contains(t, []string{"queen", "queen_streams"}, row["schema"])
	}
}

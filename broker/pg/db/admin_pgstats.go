package db

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// brokerSchemas limits the statistics to the broker's own tables.
const brokerSchemas = `schemaname IN ('queen', 'queen_streams')`

// pgStats are the statistics reads of postgres-stats, each a list of rows
// keyed as the answer names its fields. The ratios are percentages.
var pgStats = []struct{ name, sql string }{
	{"databaseCache", `SELECT datname AS "database", blks_read AS "diskReads", blks_hit AS "cacheHits",
		round(100.0 * blks_hit / nullif(blks_hit + blks_read, 0), 2)::float8 AS "cacheHitRatio"
		FROM pg_stat_database WHERE datname = current_database()`},
	{"tableCache", `SELECT schemaname AS "schema", relname AS "table", coalesce(heap_blks_read, 0) AS "diskReads",
		coalesce(heap_blks_hit, 0) AS "cacheHits",
		round(100.0 * heap_blks_hit / nullif(heap_blks_hit + heap_blks_read, 0), 2)::float8 AS "cacheHitRatio"
		FROM pg_statio_user_tables WHERE ` + brokerSchemas + ` ORDER BY heap_blks_read DESC NULLS LAST, relname`},
	{"indexCache", `SELECT schemaname AS "schema", relname AS "table", indexrelname AS "index",
		coalesce(idx_blks_read, 0) AS "diskReads", coalesce(idx_blks_hit, 0) AS "cacheHits",
		round(100.0 * idx_blks_hit / nullif(idx_blks_hit + idx_blks_read, 0), 2)::float8 AS "cacheHitRatio"
		FROM pg_statio_user_indexes WHERE ` + brokerSchemas + ` ORDER BY idx_blks_read DESC NULLS LAST, indexrelname`},
	{"cacheSummary", `SELECT kind, sum(reads)::bigint AS "diskReads", sum(hits)::bigint AS "cacheHits",
		round(100.0 * sum(hits) / nullif(sum(hits) + sum(reads), 0), 2)::float8 AS "cacheHitRatio"
		FROM (SELECT 'tables' AS kind, coalesce(heap_blks_read, 0) AS reads, coalesce(heap_blks_hit, 0) AS hits
		        FROM pg_statio_user_tables WHERE ` + brokerSchemas + `
		      UNION ALL
		      SELECT 'indexes', coalesce(idx_blks_read, 0), coalesce(idx_blks_hit, 0)
		        FROM pg_statio_user_indexes WHERE ` + brokerSchemas + `) x
		GROUP BY kind`},
	{"deadTuples", `SELECT schemaname || '.' || relname AS "table", n_dead_tup AS "deadTuples", n_live_tup AS "liveTuples",
		coalesce(round(100.0 * n_dead_tup / nullif(n_live_tup + n_dead_tup, 0), 2), 0)::float8 AS "deadPercentage",
		last_vacuum AS "lastVacuum", last_autovacuum AS "lastAutovacuum"
		FROM pg_stat_user_tables WHERE ` + brokerSchemas + ` ORDER BY n_dead_tup DESC, relname`},
	{"hotUpdates", `SELECT schemaname || '.' || relname AS "table", n_tup_upd AS "totalUpdates", n_tup_hot_upd AS "hotUpdates",
		coalesce(round(100.0 * n_tup_hot_upd / nullif(n_tup_upd, 0), 2), 0)::float8 AS "hotUpdatePercentage"
		FROM pg_stat_user_tables WHERE ` + brokerSchemas + ` ORDER BY n_tup_upd DESC, relname`},
	{"autovacuumStatus", `SELECT schemaname || '.' || relname AS "table", last_autovacuum AS "lastAutovacuum",
		n_dead_tup AS "deadTuples", autovacuum_count AS "autovacuumCount", autoanalyze_count AS "autoanalyzeCount"
		FROM pg_stat_user_tables WHERE ` + brokerSchemas + ` ORDER BY relname`},
	// The statements' text only (Regent passes every value as a parameter),
	// cut to a line's length.
	{"activeQueries", `SELECT pid, extract(epoch FROM now() - query_start)::float8 AS "duration", state,
		left(query, 200) AS "query", wait_event_type AS "waitEventType", wait_event AS "waitEvent"
		FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND state IS DISTINCT FROM 'idle'
		ORDER BY query_start`},
	{"bufferConfig", `SELECT current_setting('shared_buffers') AS "sharedBuffers",
		pg_size_bytes(current_setting('shared_buffers')) AS "sharedBuffersSize"`},
	{"tableSizes", `SELECT schemaname || '.' || relname AS "table",
		pg_size_pretty(pg_total_relation_size(relid)) AS "totalSize", pg_size_pretty(pg_relation_size(relid)) AS "tableSize",
		pg_size_pretty(pg_indexes_size(relid)) AS "indexSize", pg_total_relation_size(relid) AS "totalBytes",
		pg_relation_size(relid) AS "tableBytes", pg_indexes_size(relid) AS "indexBytes"
		FROM pg_stat_user_tables WHERE ` + brokerSchemas + ` ORDER BY pg_total_relation_size(relid) DESC, relname`},
}

// PostgresStats reads PostgreSQL's statistics views for the broker's
// schemas, each list under its name, and the database's name. Cost: one
// round trip, a batch of ten reads of the statistics views, whose rows
// are the broker's 15 or so tables and their indexes.
func (d *DB) PostgresStats(ctx context.Context) (string, map[string][]map[string]any, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT current_database()`)
	for _, q := range pgStats {
		b.Queue(q.sql)
	}
	res := d.q.SendBatch(ctx, b)
	defer res.Close()
	var database string
	if err := res.QueryRow().Scan(&database); err != nil {
		return "", nil, fmt.Errorf("read the database name: %w", err)
	}
	out := map[string][]map[string]any{}
	for _, q := range pgStats {
		rows, err := res.Query()
		if err != nil {
			return "", nil, fmt.Errorf("read %s: %w", q.name, err)
		}
		if out[q.name], err = pgx.CollectRows(rows, pgx.RowToMap); err != nil {
			return "", nil, fmt.Errorf("read %s: %w", q.name, err)
		}
	}
	return database, out, res.Close()
}

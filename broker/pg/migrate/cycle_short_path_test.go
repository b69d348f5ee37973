package migrate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/pgtest"
)

// cycleWorld is a query on a source partition whose group "g" holds a live
// lease on a batch of 10, with one state row ("old"), and two sink
// partitions, the first of which recorded the client transaction ids
// "seen" (a minute ago) and "expired" (before the dedup window).
type cycleWorld struct {
	query, partition, lease uuid.UUID
	sinks                   [2]uuid.UUID
	oldAt                   time.Time // the updated_at of state row "old"
}

func newCycleWorld(t *testing.T, pool *pgxpool.Pool) cycleWorld {
	t.Helper()
	w := cycleWorld{query: uuid.New(), partition: uuid.New(), lease: uuid.New(), sinks: [2]uuid.UUID{uuid.New(), uuid.New()}}
	if w.sinks[1].String() < w.sinks[0].String() {
		w.sinks[0], w.sinks[1] = w.sinks[1], w.sinks[0] // the lock order
	}
	src, sink := uuid.New(), uuid.New()
	_, err := pool.Exec(t.Context(), `
		WITH q AS (INSERT INTO queen.queues (id, name) VALUES ($1, 'src'), ($2, 'sink')),
		     p AS (INSERT INTO queen.partitions (id, queue_id, name, next_offset)
		           VALUES ($3, $1, 'Default', 10), ($4, $2, 'a', 7), ($5, $2, 'b', 0)),
		     r AS (INSERT INTO queen_streams.queries (id, name, source_queue, sink_queue, config_hash)
		           VALUES ($6, 'q', 'src', 'sink', 'h')),
		     c AS (INSERT INTO queen.cursors (partition_id, consumer_group, committed, batch_start, batch_end, lease_id, lease_expires_at)
		           VALUES ($3, 'g', 0, 0, 10, $7, now() + interval '1 minute'))
		INSERT INTO queen_streams.state (query_id, partition_id, key, value) VALUES ($6, $3, 'old', '1')`,
		src, sink, w.partition, w.sinks[0], w.sinks[1], w.query, w.lease)
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), `INSERT INTO queen_streams.state_rows VALUES ($1, $2, 1)`, w.query, w.partition)
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), `INSERT INTO queen.push_dedup (partition_id, transaction_id, message_id, created_at)
		VALUES ($1, 'seen', $2, now() - interval '1 minute'), ($1, 'expired', $3, now() - interval '2 hours')`,
		w.sinks[0], uuid.New(), uuid.New())
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT updated_at FROM queen_streams.state`).Scan(&w.oldAt))
	return w
}

// cycleCall is the arguments of a cycle, as broker/pg/db passes them.
type cycleCall struct {
	tenant            string
	query, partition  uuid.UUID
	upserts, deletes  []string
	expect            []string // state rows expected as the world wrote them
	expectAt          []*time.Time
	segs              []uuid.UUID // one frame each
	dedups            bool        // the frames carry client transaction ids
	first             []string    // the first segment's frames' transaction ids; nil: one frame
	ack, ok, release  bool
	lease             uuid.UUID
	count, generation *int64
}

// common is the cycle of a fold as the SDKs send it: state written, one
// sink item, the ack of the whole batch.
func (w cycleWorld) common() cycleCall {
	ten := int64(10)
	return cycleCall{tenant: "default", query: w.query, partition: w.partition, upserts: []string{"a", "b"},
		deletes: []string{"old"}, segs: w.sinks[:1], ack: true, ok: true, release: true, lease: w.lease, count: &ten}
}

var cycleAt = time.Date(2026, 8, 17, 10, 0, 0, 0, time.UTC)

// cycleV5 calls the cycle as broker/pg/db does.
const cycleV5 = `queen_streams.cycle_v5(ROW($1, $2, $3, 'g', $4, $5::jsonb[], $6, $22, $23,
	$7, $8, $9, $10, $11, $12, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)::queen_streams.cycle_request)`

// run calls the cycle by call (as cycleV5 does) with c in tx, and answers its
// rows, or its error, as text.
func (c cycleCall) run(ctx context.Context, tx pgx.Tx, call string) ([]string, error) {
	values := make([]string, len(c.upserts))
	for i := range values {
		values[i] = fmt.Sprint(i)
	}
	var frames, dedups []int32
	var bodies [][]byte
	var sums []int64
	var txids, dedupTx []string
	var dedupIDs []uuid.UUID
	var at []time.Time
	for i := range c.segs {
		ids := []string{fmt.Sprint("t", i)}
		if i == 0 && c.first != nil {
			ids = c.first
		}
		frames, bodies, sums, at = append(frames, int32(len(ids))), append(bodies, []byte{byte(i)}), append(sums, int64(i)), append(at, cycleAt)
		txids = append(txids, ids...)
		if !c.dedups {
			dedups = append(dedups, 0)
			continue
		}
		dedups, dedupTx = append(dedups, int32(len(ids))), append(dedupTx, ids...)
		for range ids {
			dedupIDs = append(dedupIDs, uuid.New())
		}
	}
	rows, err := tx.Query(ctx, `SELECT outcome, queue_name, base_offsets, ack_count, lease_released, announce, partition_id, dup_txids
		FROM `+call,
		c.tenant, c.query, c.partition, c.upserts, values, c.deletes,
		c.segs, frames, bodies, sums, txids, at, dedups, dedupTx, dedupIDs,
		c.ack, c.lease, c.ok, c.count, c.release, c.generation, c.expect, c.expectAt)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		v, err := r.Values()
		return fmt.Sprint(v), err
	})
}

// written is what a cycle leaves in the tables, but for the times taken
// from now().
func written(ctx context.Context, t *testing.T, tx pgx.Tx) string {
	t.Helper()
	var out string
	err := tx.QueryRow(ctx, `SELECT concat_ws(E'\n',
		(SELECT string_agg(concat_ws(' ', committed, batch_end, lease_id, lease_expires_at, retry_count, total_consumed), ';') FROM queen.cursors),
		(SELECT string_agg(concat_ws(' ', name, next_offset, stored_bytes, last_push_at), ';' ORDER BY name) FROM queen.partitions),
		(SELECT string_agg(concat_ws(' ', base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at), ';' ORDER BY partition_id) FROM queen.log_segments),
		(SELECT string_agg(concat_ws(' ', key, value), ';' ORDER BY key) FROM queen_streams.state),
		(SELECT string_agg(row_count::text, ';') FROM queen_streams.state_rows),
		(SELECT string_agg(concat_ws(' ', transaction_id, created_at > now() - interval '1 hour'), ';' ORDER BY transaction_id) FROM queen.push_dedup))`).Scan(&out)
	require.NoError(t, err)
	return out
}

// outcome runs c in a transaction it rolls back, and answers the rows or
// the error, what the cycle wrote, and whether it called
// queen_streams.cycle_rules. Without short, the short path is replaced in
// that transaction by one that never finishes, so that the rules answer
// every cycle.
func (c cycleCall) outcome(t *testing.T, pool *pgxpool.Pool, call string, short bool) (answer, tables string, calledRules bool) {
	t.Helper()
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, tx.Rollback(ctx)) }()
	_, err = tx.Exec(ctx, `SET LOCAL track_functions = 'pl'`)
	require.NoError(t, err)
	// The view holds what the connection did since it last reported, not
	// only this transaction.
	rulesCalls := func() (n int64) {
		require.NoError(t, tx.QueryRow(ctx, `SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions
			WHERE schemaname = 'queen_streams' AND funcname = 'cycle_rules'`).Scan(&n))
		return n
	}
	if !short {
		_, err = tx.Exec(ctx, `CREATE OR REPLACE FUNCTION queen_streams.cycle_short(r queen_streams.cycle_request,
			a queen_streams.cycle_answer, p_next_offset bigint) RETURNS SETOF queen_streams.cycle_answer
			LANGUAGE sql AS 'SELECT a WHERE false'`)
		require.NoError(t, err)
	}
	before := rulesCalls()
	// A savepoint keeps the transaction usable after a refusal.
	_, err = tx.Exec(ctx, `SAVEPOINT cycle`)
	require.NoError(t, err)
	rows, err := c.run(ctx, tx, call)
	if err != nil {
		answer = "error: " + err.Error()
		_, err = tx.Exec(ctx, `ROLLBACK TO SAVEPOINT cycle`)
		require.NoError(t, err)
	} else {
		answer = fmt.Sprint(rows)
	}
	return answer, written(ctx, t, tx), rulesCalls() > before
}

// The cycle answers every cycle as its rules (queen_streams.cycle_rules)
// do, and writes what they write, refusals included; only the common case
// (a success ack that releases, with a count) takes its short path, a
// short path that cannot finish (a refusal) leaves the verdict to the
// rules, and the sink pushes' own answers (duplicates, gone) come before
// either.
func TestTheCycleAnswersAsItsRulesAndTakesTheShortPathOnlyInTheCommonCase(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	w := newCycleWorld(t, pool)
	zero, eleven := int64(0), int64(11)
	for _, c := range []struct {
		name  string
		edit  func(c *cycleCall)
		rules bool // cycle_rules answers
	}{
		{"common", func(*cycleCall) {}, false},
		{"no sink item", func(c *cycleCall) { c.segs = nil }, false},
		{"no state op", func(c *cycleCall) { c.upserts, c.deletes = nil, nil }, false},
		{"the reset generation it carries", func(c *cycleCall) { c.generation = &zero }, false},
		{"the rows it read, as it read them", func(c *cycleCall) {
			c.expect, c.expectAt = []string{"old", "old"}, []*time.Time{nil, &w.oldAt}
		}, false},
		{"a row changed since it was read", func(c *cycleCall) {
			c.expect, c.expectAt = []string{"old"}, []*time.Time{&cycleAt}
		}, true},
		{"a row gone since it was read", func(c *cycleCall) { c.expect, c.expectAt = []string{"gone"}, []*time.Time{nil} }, true},
		{"two sink segments", func(c *cycleCall) { c.segs = w.sinks[:] }, false},
		{"client transaction ids", func(c *cycleCall) { c.dedups = true }, false},
		{"a transaction id the sink partition holds", func(c *cycleCall) { c.dedups, c.first = true, []string{"new", "seen"} }, false},
		{"a transaction id recorded before the dedup window", func(c *cycleCall) {
			c.dedups, c.first = true, []string{"expired", "new"}
		}, false},
		{"a transaction id the sink partition holds, and another worker's lease", func(c *cycleCall) {
			c.dedups, c.first, c.lease = true, []string{"seen"}, uuid.New()
		}, false},
		{"no count", func(c *cycleCall) { c.count = nil }, true},
		{"a nack", func(c *cycleCall) { c.ok = false }, true},
		{"the lease kept", func(c *cycleCall) { c.release = false }, true},
		{"an idle flush", func(c *cycleCall) { c.ack = false }, true},
		{"another worker's lease", func(c *cycleCall) { c.lease = uuid.New() }, true},
		{"a foreign query", func(c *cycleCall) { c.tenant = "other" }, true},
		{"an unknown query", func(c *cycleCall) { c.query = uuid.New() }, true},
		{"an unknown partition", func(c *cycleCall) { c.partition = uuid.New() }, true},
		{"a stale generation", func(c *cycleCall) { c.generation = &eleven }, true},
		{"a gone sink partition", func(c *cycleCall) { c.segs = []uuid.UUID{uuid.New()} }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			call := w.common()
			c.edit(&call)
			wantAnswer, wantTables, _ := call.outcome(t, pool, cycleV5, false)
			answer, tables, calledRules := call.outcome(t, pool, cycleV5, true)
			require.Equal(t, wantAnswer, answer)
			require.Equal(t, wantTables, tables)
			// A function that raised is not counted as called.
			if !strings.HasPrefix(answer, "error") {
				require.Equal(t, c.rules, calledRules, "whether the rules ran")
			}
		})
	}
	t.Run("a suspended query", func(t *testing.T) {
		_, err := pool.Exec(t.Context(), `UPDATE queen_streams.queries SET suspended = true`)
		require.NoError(t, err)
		wantAnswer, wantTables, _ := w.common().outcome(t, pool, cycleV5, false)
		answer, tables, _ := w.common().outcome(t, pool, cycleV5, true)
		require.Contains(t, answer, "query suspended")
		require.Equal(t, wantAnswer, answer)
		require.Equal(t, wantTables, tables)
	})
}

// queen.pop_v2 turns synchronous_commit off for its transaction, since a
// lost pop only redelivers; a cycle that carries the next batch
// (queen_streams.cycle_next_v2) pops in the cycle's transaction, whose commit
// must not be lost, and puts the setting back.
func TestACycleThatCarriesTheNextBatchCommitsSynchronously(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	w := newCycleWorld(t, pool)
	cycleNext := strings.Replace(cycleV5, "queen_streams.cycle_v5(", "queen_streams.cycle_next_v2($3::uuid, ", 1)
	cycleNext = strings.TrimSuffix(cycleNext, ")") + ", NULL, gen_random_uuid(), 10, 1048576)"
	tx, err := pool.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	// The test clusters run with it off.
	_, err = tx.Exec(t.Context(), `SET LOCAL synchronous_commit = on`)
	require.NoError(t, err)
	answer, err := w.common().run(t.Context(), tx, cycleNext)
	require.NoError(t, err)
	require.Contains(t, fmt.Sprint(answer), "committed")
	var sync string
	require.NoError(t, tx.QueryRow(t.Context(), `SHOW synchronous_commit`).Scan(&sync))
	require.Equal(t, "on", sync)
}

package retention_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/db"
	"github.com/regent-mq/regent/broker/hotlist"
	"github.com/regent-mq/regent/broker/retention"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

func do(t *testing.T, b *brokertest.Broker, method, path string, body any) brokertest.Response {
	t.Helper()
	resp := b.Do(t, method, path, "", body)
	require.Less(t, resp.Status, 300, "%s %s: %s", method, path, resp.Body)
	return resp
}

func pushN(t *testing.T, b *brokertest.Broker, queue string, n int) {
	t.Helper()
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{"queue": queue, "payload": i}
	}
	do(t, b, "POST", "/api/v1/push", map[string]any{"items": items})
}

func segments(t *testing.T, b *brokertest.Broker) int {
	t.Helper()
	var n int
	require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT count(*) FROM queen.log_segments`).Scan(&n))
	return n
}

func sweeper(b *brokertest.Broker, window time.Duration) *retention.Sweeper {
	return sweeperWith(b, retention.Settings{DedupWindow: window, RetentionChunk: 1000, EvictionChunk: 1000,
		CleanupAfter: 30 * 24 * time.Hour})
}

// sweeperWith announces through the broker's own channel, as its
// replicas' sweepers do.
func sweeperWith(b *brokertest.Broker, set retention.Settings) *retention.Sweeper {
	return retention.New(db.New(b.Pool), slog.New(slog.NewTextHandler(io.Discard, nil)), set, func(q, p uuid.UUID) {
		if _, err := b.Pool.Exec(context.Background(), `SELECT pg_notify($1, $2)`, hotlist.Channel, q.String()+":"+p.String()); err != nil {
			panic(err)
		}
	})
}

func TestSegmentsPastRetentionSecondsAreDeletedWhole(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	do(t, b, "POST", "/api/v1/configure", map[string]any{"queue": "short", "options": map[string]any{
		"retentionEnabled": true, "retentionSeconds": 60}})
	pushN(t, b, "short", 3)
	pushN(t, b, "short", 2)
	pushN(t, b, "keep", 2)
	_, err := b.Pool.Exec(t.Context(), `UPDATE queen.log_segments SET max_created_at = now() - interval '2 minutes'
		WHERE base_offset = 0`)
	require.NoError(t, err)
	st, err := sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 3, st.Aged, "only the old segment's messages, of the queue with retention")
	require.EqualValues(t, 1, st.Segments)
	require.Equal(t, 2, segments(t, b))
	// The gap is walked over.
	resp := do(t, b, "GET", "/api/v1/pop/queue/short?batch=10", nil)
	require.Len(t, resp.Map(t)["messages"], 2)
}

func TestConsumedSegmentsGoOnlyWhenEveryGroupConsumedThem(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	do(t, b, "POST", "/api/v1/configure", map[string]any{"queue": "q", "options": map[string]any{
		"retentionEnabled": true, "completedRetentionSeconds": 1}})
	pushN(t, b, "q", 2)
	pushN(t, b, "q", 2)
	sw := sweeper(b, time.Hour)
	sweep := func() int64 {
		_, err := b.Pool.Exec(t.Context(), `UPDATE queen.log_segments SET max_created_at = now() - interval '1 minute'`)
		require.NoError(t, err)
		st, err := sw.Sweep(t.Context())
		require.NoError(t, err)
		return st.Segments
	}
	popAck := func(group string) {
		resp := do(t, b, "GET", "/api/v1/pop/queue/q/partition/Default?batch=2&consumerGroup="+group, nil)
		msgs := resp.Map(t)["messages"].([]any)
		last := msgs[len(msgs)-1].(map[string]any)
		do(t, b, "POST", "/api/v1/ack", map[string]any{"transactionId": last["transactionId"],
			"partitionId": last["partitionId"], "consumerGroup": group})
	}
	popAck("g1")
	require.EqualValues(t, 1, sweep(), "g1 is the only group: its first segment is consumed")

	// g2 subscribes through another partition; until it has a cursor on
	// Default it may still want all of it.
	do(t, b, "POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "q", "partition": "other"}}})
	do(t, b, "GET", "/api/v1/pop/queue/q/partition/other?consumerGroup=g2&autoAck=true", nil)
	popAck("g1")
	require.Zero(t, sweep())
	popAck("g2") // reads 2 and 3 (0 and 1 are gone) and acks them
	require.EqualValues(t, 1, sweep())
	require.Equal(t, 1, segments(t, b), "partition other is kept: g1 has no cursor there")
}

func TestCompletedRetentionSecondsDelaysTheDeletion(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	do(t, b, "POST", "/api/v1/configure", map[string]any{"queue": "q", "options": map[string]any{
		"retentionEnabled": true, "completedRetentionSeconds": 3600}})
	pushN(t, b, "q", 1)
	do(t, b, "GET", "/api/v1/pop/queue/q?autoAck=true", nil)
	st, err := sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	require.Zero(t, st.Consumed)
	_, err = b.Pool.Exec(t.Context(), `UPDATE queen.log_segments SET max_created_at = now() - interval '2 hours'`)
	require.NoError(t, err)
	st, err = sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Consumed)
	require.EqualValues(t, 1, st.Segments)
}

func TestDedupRowsAreSweptAfterTheWindow(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	do(t, b, "POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "q", "transactionId": "t1"}}})
	st, err := sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	require.Zero(t, st.Dedup)
	_, err = b.Pool.Exec(t.Context(), `UPDATE queen.push_dedup SET created_at = now() - interval '2 hours'`)
	require.NoError(t, err)
	st, err = sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Dedup)
	resp := do(t, b, "POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "q", "transactionId": "t1"}}})
	var out []map[string]any
	resp.JSON(t, &out)
	require.Equal(t, "queued", out[0]["status"], "outside the window the id is new again")
}

func TestDedupRowsAreSweptAfterTheirQueuesOwnWindow(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	for q, window := range map[string]any{"short": 60, "long": 7200, "default": nil} {
		do(t, b, "POST", "/api/v1/configure", map[string]any{"queue": q, "options": map[string]any{"dedupWindowSeconds": window}})
		do(t, b, "POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": q, "transactionId": "t1"}}})
	}
	_, err := b.Pool.Exec(t.Context(), `UPDATE queen.push_dedup SET created_at = now() - interval '2 hours' + interval '1 minute'`)
	require.NoError(t, err)
	st, err := sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Dedup, "short's minute and default's hour are over, long's two hours are not")
	require.Equal(t, 1, b.Count(t, `SELECT count(*) FROM queen.push_dedup d JOIN queen.partitions p ON p.id = d.partition_id
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'long'`))
}

// An unsummarized BRIN range matches every search: a sweep that left the
// rows pushed since the last vacuum unsummarized would read them all again
// at its next turn.
func TestTheDedupSweepSummarizesTheRowsPushedSinceItsLastTurn(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	// Some 300 pages: the index's first block range of 128 pages is
	// summarized from its creation on, the next ones are not.
	_, err := b.Pool.Exec(t.Context(), `INSERT INTO queen.push_dedup (partition_id, transaction_id, message_id)
		SELECT gen_random_uuid(), 't' || g, gen_random_uuid() FROM generate_series(1, 30000) g`)
	require.NoError(t, err)
	_, err = sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	var left int
	require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT brin_summarize_new_values('queen.push_dedup_created_brin')`).Scan(&left))
	require.Zero(t, left, "block ranges the sweep left unsummarized")
}

func TestRetentionAndEvictionRunOneAtATimeOnOneLock(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	conn, err := b.Pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	sw := sweeper(b, time.Hour)
	for name, run := range map[string]func(context.Context) (retention.Stats, error){"retention": sw.Sweep, "eviction": sw.Evict} {
		_, err = conn.Exec(t.Context(), `SELECT pg_advisory_lock($1)`, int64(0x72657461696e))
		require.NoError(t, err)
		st, err := run(t.Context())
		require.NoError(t, err)
		require.True(t, st.Skipped, "%s while another replica sweeps", name)
		_, err = conn.Exec(t.Context(), `SELECT pg_advisory_unlock($1)`, int64(0x72657461696e))
		require.NoError(t, err)
		st, err = run(t.Context())
		require.NoError(t, err)
		require.False(t, st.Skipped, name)
	}
}

func TestEverySweepRecordsWhatItRemovedPerPartitionForTheAnalytics(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	do(t, b, "POST", "/api/v1/configure", map[string]any{"queue": "aged", "options": map[string]any{
		"retentionEnabled": true, "retentionSeconds": 1}})
	for _, p := range []string{"a", "a", "b"} {
		do(t, b, "POST", "/api/v1/push", map[string]any{"items": []any{
			map[string]any{"queue": "aged", "partition": p, "payload": 1}, map[string]any{"queue": "aged", "partition": p, "payload": 2}}})
	}
	_, err := b.Pool.Exec(t.Context(), `UPDATE queen.log_segments SET max_created_at = now() - interval '1 hour'`)
	require.NoError(t, err)
	st, err := sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 6, st.Aged)
	rows, err := b.Pool.Query(t.Context(), `SELECT p.name || ' ' || e.tenant || ' ' || e.queue || ' ' || e.kind || ' ' || e.messages
		  FROM queen.retention_events e JOIN queen.partitions p ON p.id = e.partition_id ORDER BY p.name`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"a " + b.Tenant + " aged retention 4", "b " + b.Tenant + " aged retention 2"}, got,
		"one event per partition, with the messages removed")
}

// The tenant quota's maxStoredBytes is checked against the partitions'
// stored_bytes counters: the push adds each segment's body, and retention
// takes off what it deletes, so the counter always equals the log.
func TestRetentionKeepsTheStoredBytesCounterEqualToTheLog(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	do(t, b, "POST", "/api/v1/configure", map[string]any{"queue": "short", "options": map[string]any{
		"retentionEnabled": true, "retentionSeconds": 60}})
	pushN(t, b, "short", 3)
	pushN(t, b, "short", 2)
	counted := func() (counter, actual int) {
		require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT
			(SELECT coalesce(sum(stored_bytes), 0) FROM queen.partitions),
			(SELECT coalesce(sum(octet_length(body)), 0) FROM queen.log_segments)`).Scan(&counter, &actual))
		return counter, actual
	}
	counter, actual := counted()
	require.Positive(t, actual)
	require.Equal(t, actual, counter, "after the pushes")
	_, err := b.Pool.Exec(t.Context(), `UPDATE queen.log_segments SET max_created_at = now() - interval '2 minutes'
		WHERE base_offset = 0`)
	require.NoError(t, err)
	st, err := sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 3, st.Aged, "the old segment's messages")
	require.EqualValues(t, 1, st.Segments)
	counter, after := counted()
	require.Less(t, after, actual)
	require.Equal(t, after, counter, "after the sweep")
}

func TestASweepDeletesTheMinutesSamplesAndEventsOlderThanTheMetricsRetention(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	for _, at := range []string{"now() - interval '3 hours'", "now()"} {
		for _, sql := range []string{
			`INSERT INTO queen.queue_minutes (tenant, minute, queue, replica) VALUES ('t', date_trunc('minute', ` + at + `), 'q', 'r')`,
			`INSERT INTO queen_streams.query_minutes (tenant, query_id, minute, replica) VALUES ('t', gen_random_uuid(), date_trunc('minute', ` + at + `), 'r')`,
			`INSERT INTO queen.group_minutes (tenant, queue, consumer_group, minute, lag, lag_seconds) VALUES ('t', 'q', 'g', date_trunc('minute', ` + at + `), 1, 1)`,
			`INSERT INTO queen.replica_samples (replica, minute, sampled_at, cpu_user_pct, cpu_sys_pct, rss_bytes, virtual_bytes, pool_size, pool_idle, pool_active)
				VALUES ('t', date_trunc('minute', ` + at + `), ` + at + `, 0, 0, 0, 0, 0, 0, 0)`,
			`INSERT INTO queen.retention_events (tenant, at, queue, partition_id, kind, messages) VALUES ('t', ` + at + `, 'q', gen_random_uuid(), 'retention', 1)`,
		} {
			_, err := b.Pool.Exec(t.Context(), sql)
			require.NoError(t, err)
		}
	}
	_, err := sweeperWith(b, retention.Settings{DedupWindow: time.Hour, RetentionChunk: 1000, EvictionChunk: 1000,
		CleanupAfter: 30 * 24 * time.Hour, MetricsAge: 2 * time.Hour}).Sweep(t.Context())
	require.NoError(t, err)
	for _, table := range []string{"queen.queue_minutes WHERE tenant", "queen_streams.query_minutes WHERE tenant",
		"queen.group_minutes WHERE tenant", "queen.replica_samples WHERE replica", "queen.retention_events WHERE tenant"} {
		var n int
		require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT count(*) FROM `+table+` = 't'`).Scan(&n))
		require.Equal(t, 1, n, "%s keeps only its recent row", table)
	}
}

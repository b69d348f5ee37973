package retention_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/domain/hotlist"
	"github.com/regent-mq/regent/broker/domain/retention"
	"github.com/regent-mq/regent/broker/domain/segment"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

// The shared broker's own sweeps never run during the tests: each test
// sweeps when it means to.
func TestMain(m *testing.M) {
	brokertest.Main(m, func(c *config.Config) { c.RetentionEvery, c.EvictionEvery = 24*time.Hour, 24*time.Hour })
}

// shared gives the test the package's broker. A sweep reaches every queue
// of the database and takes a lock that makes a concurrent one skip its
// turn, so the tests of this package run one at a time, and each deletes
// its queues when it ends: no later sweep finds what it left.
func shared(t *testing.T) *brokertest.Broker {
	t.Helper()
	b := brokertest.Shared(t)
	t.Cleanup(func() {
		var list struct {
			Queues []struct {
				Name string `json:"name"`
			} `json:"queues"`
		}
		b.Call(t, http.StatusOK, "GET", "/api/v1/resources/queues", nil).JSON(t, &list)
		for _, q := range list.Queues {
			if strings.HasPrefix(q.Name, b.Q("")) {
				b.Call(t, http.StatusOK, "DELETE", "/api/v1/resources/queues/"+q.Name, nil)
			}
		}
	})
	return b
}

func configure(t *testing.T, b *brokertest.Broker, queue string, options map[string]any) {
	t.Helper()
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": queue, "options": options})
}

// segments counts the segments a queue holds.
func segments(t *testing.T, b *brokertest.Broker, queue string) int {
	t.Helper()
	return b.Stored(t, queue).Segments
}

func sweeper(b *brokertest.Broker, window time.Duration) *retention.Sweeper {
	return sweeperWith(b, retention.Settings{DedupWindow: window, RetentionChunk: 1000, EvictionChunk: 1000,
		CleanupAfter: 30 * 24 * time.Hour})
}

// sweeperWith announces through the broker's own channel, as its
// replicas' sweepers do.
func sweeperWith(b *brokertest.Broker, set retention.Settings) *retention.Sweeper {
	d := db.New(b.Pool)
	return retention.New(d, slog.New(slog.NewTextHandler(io.Discard, nil)), set, func(q, p uuid.UUID) {
		if err := d.Notify(context.Background(), hotlist.Channel, []string{q.String() + ":" + p.String()}); err != nil {
			panic(err)
		}
	})
}

func TestSegmentsPastRetentionSecondsAreDeletedWhole(t *testing.T) {
	b := shared(t)
	short, keep := b.Q("short"), b.Q("keep")
	configure(t, b, short, map[string]any{"retentionEnabled": true, "retentionSeconds": 60})
	b.PushN(t, short, "", 0, 3)
	b.Age(t, short, 2*time.Minute)
	b.PushN(t, short, "", 3, 2)
	b.PushN(t, keep, "", 0, 2)
	b.Age(t, keep, 2*time.Minute)
	st, err := sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 3, st.Aged, "only the old segment's messages, of the queue with retention")
	require.EqualValues(t, 1, st.Segments)
	require.Equal(t, 1, segments(t, b, short))
	require.Equal(t, 1, segments(t, b, keep))
	// The gap is walked over.
	require.Equal(t, []int{3, 4}, b.Pop(t, "/api/v1/pop/queue/"+short+"?batch=10").Ns())
}

func TestConsumedSegmentsGoOnlyWhenEveryGroupConsumedThem(t *testing.T) {
	b := shared(t)
	q := b.Q("q")
	configure(t, b, q, map[string]any{"retentionEnabled": true, "completedRetentionSeconds": 1})
	b.PushN(t, q, "", 0, 2)
	b.PushN(t, q, "", 2, 2)
	sw := sweeper(b, time.Hour)
	sweep := func() int64 {
		b.Age(t, q, time.Minute)
		st, err := sw.Sweep(t.Context())
		require.NoError(t, err)
		return st.Segments
	}
	popAck := func(group string) {
		p := b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/Default?batch=2&consumerGroup="+group)
		last := p.Messages[len(p.Messages)-1]
		b.Call(t, http.StatusOK, "POST", "/api/v1/ack", map[string]any{"transactionId": last.TransactionID,
			"partitionId": last.PartitionID, "consumerGroup": group})
	}
	popAck("g1")
	require.EqualValues(t, 1, sweep(), "g1 is the only group: its first segment is consumed")

	// g2 subscribes through another partition; until it has a cursor on
	// Default it may still want all of it.
	b.PushN(t, q, "other", 0, 1)
	b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/other?consumerGroup=g2&autoAck=true")
	popAck("g1")
	require.Zero(t, sweep())
	popAck("g2") // reads 2 and 3 (0 and 1 are gone) and acks them
	require.EqualValues(t, 1, sweep())
	require.Equal(t, 1, segments(t, b, q), "partition other is kept: g1 has no cursor there")
}

func TestCompletedRetentionSecondsDelaysTheDeletion(t *testing.T) {
	b := shared(t)
	q := b.Q("q")
	configure(t, b, q, map[string]any{"retentionEnabled": true, "completedRetentionSeconds": 3600})
	b.PushN(t, q, "", 0, 1)
	b.Pop(t, "/api/v1/pop/queue/"+q+"?autoAck=true")
	st, err := sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	require.Zero(t, st.Consumed)
	b.Age(t, q, 2*time.Hour)
	st, err = sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Consumed)
	require.EqualValues(t, 1, st.Segments)
}

func TestDedupRowsAreSweptAfterTheWindow(t *testing.T) {
	b := shared(t)
	q := b.Q("q")
	push := []map[string]any{{"queue": q, "transactionId": "t1"}}
	b.Push(t, push...)
	st, err := sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	require.Zero(t, st.Dedup)
	b.Age(t, q, 2*time.Hour)
	st, err = sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Dedup)
	require.Equal(t, "queued", b.Push(t, push...)[0]["status"], "outside the window the id is new again")
}

func TestDedupRowsAreSweptAfterTheirQueuesOwnWindow(t *testing.T) {
	b := shared(t)
	for q, window := range map[string]any{"short": 60, "long": 7200, "default": nil} {
		configure(t, b, b.Q(q), map[string]any{"dedupWindowSeconds": window})
		b.Push(t, map[string]any{"queue": b.Q(q), "transactionId": "t1"})
		b.Age(t, b.Q(q), 2*time.Hour-time.Minute)
	}
	st, err := sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Dedup, "short's minute and default's hour are over, long's two hours are not")
	require.Equal(t, 1, b.Stored(t, b.Q("long")).Dedup)
}

// An unsummarized BRIN range matches every search: a sweep that left the
// rows pushed since the last vacuum unsummarized would read them all again
// at its next turn.
func TestTheDedupSweepSummarizesTheRowsPushedSinceItsLastTurn(t *testing.T) {
	b := shared(t)
	// Some 300 pages: the index's first block range of 128 pages is
	// summarized from its creation on, the next ones are not.
	require.NoError(t, b.DB.AddOrphanDedup(t.Context(), 30000))
	_, err := sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	left, err := b.DB.UnsummarizedDedup(t.Context())
	require.NoError(t, err)
	require.Zero(t, left, "block ranges the sweep left unsummarized")
}

func TestRetentionAndEvictionRunOneAtATimeOnOneLock(t *testing.T) {
	b := shared(t)
	sw := sweeper(b, time.Hour)
	for name, run := range map[string]func(context.Context) (retention.Stats, error){"retention": sw.Sweep, "eviction": sw.Evict} {
		// Another replica's sweep, held until released.
		inside, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			_, err := db.New(b.Pool).Sweep(t.Context(), func(*db.Sweeping) error { close(inside); <-release; return nil })
			done <- err
		}()
		<-inside
		st, err := run(t.Context())
		require.NoError(t, err)
		require.True(t, st.Skipped, "%s while another replica sweeps", name)
		close(release)
		require.NoError(t, <-done)
		st, err = run(t.Context())
		require.NoError(t, err)
		require.False(t, st.Skipped, name)
	}
}

func TestEverySweepRecordsWhatItRemovedPerPartitionForTheAnalytics(t *testing.T) {
	b := shared(t)
	q := b.Q("aged")
	configure(t, b, q, map[string]any{"retentionEnabled": true, "retentionSeconds": 1})
	for i, p := range []string{"a", "a", "b"} {
		b.PushN(t, q, p, 2*i, 2)
	}
	b.Age(t, q, time.Hour)
	st, err := sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 6, st.Aged)
	events, err := b.DB.RetentionEvents(t.Context(), b.Tenant, q)
	require.NoError(t, err)
	require.Equal(t, []dbtest.Swept{{Partition: "a", Kind: "retention", Messages: 4}, {Partition: "b", Kind: "retention", Messages: 2}}, events,
		"one event per partition, with the messages removed")
}

// The tenant quota's maxStoredBytes is checked against the partitions'
// stored_bytes counters: the push adds each segment's body, and retention
// takes off what it deletes, so the counter always equals the log.
func TestRetentionKeepsTheStoredBytesCounterEqualToTheLog(t *testing.T) {
	b := shared(t)
	q := b.Q("short")
	configure(t, b, q, map[string]any{"retentionEnabled": true, "retentionSeconds": 60})
	b.PushN(t, q, "", 0, 3)
	b.Age(t, q, 2*time.Minute)
	b.PushN(t, q, "", 3, 2)
	counted := func() (counter, actual int64) {
		for _, n := range b.SegmentSizes(t, q) {
			actual += n
		}
		return b.Stored(t, q).StoredBytes, actual
	}
	counter, actual := counted()
	require.Positive(t, actual)
	require.Equal(t, actual, counter, "after the pushes")
	st, err := sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 3, st.Aged, "the old segment's messages")
	require.EqualValues(t, 1, st.Segments)
	counter, after := counted()
	require.Less(t, after, actual)
	require.Equal(t, after, counter, "after the sweep")
}

func TestASweepDeletesTheMinutesSamplesAndEventsOlderThanTheMetricsRetention(t *testing.T) {
	b := shared(t)
	tenant := b.Q("t")
	for _, at := range []time.Time{time.Now().Add(-3 * time.Hour), time.Now()} {
		require.NoError(t, b.DB.PutMinutes(t.Context(), tenant, at))
	}
	_, err := sweeperWith(b, retention.Settings{DedupWindow: time.Hour, RetentionChunk: 1000, EvictionChunk: 1000,
		CleanupAfter: 30 * 24 * time.Hour, MetricsAge: 2 * time.Hour}).Sweep(t.Context())
	require.NoError(t, err)
	left, err := b.DB.Minutes(t.Context(), tenant)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"queen.queue_minutes": 1, "queen_streams.query_minutes": 1, "queen.group_minutes": 1,
		"queen.replica_samples": 1, "queen.retention_events": 1}, left, "each table keeps only its recent row")
}

// A queue of more partitions than Citus has shards: there, each call raises
// the floors of several partitions of one shard, moves their cursors and
// drops their segments (on PostgreSQL, one call does all of them).
func TestASweepTakesEveryPartitionOfAQueueWiderThanTheShards(t *testing.T) {
	b := shared(t)
	q := b.Q("wide")
	configure(t, b, q, map[string]any{"retentionEnabled": true, "retentionSeconds": 60})
	const wide = 100 // Citus's default is 32 shards
	old := time.Now().Add(-time.Hour).UnixMicro()
	frames := make([]segment.Frame, wide)
	for i := range frames {
		frames[i] = segment.Frame{ID: uuid.New(), TransactionID: fmt.Sprint("t", i), CreatedAt: old, Payload: []byte(`{}`)}
	}
	require.NoError(t, b.DB.Spread(t.Context(), b.Tenant, q, frames))
	require.NoError(t, b.DB.PlaceCursors(t.Context(), b.Tenant, q, "g", 0))

	st := sweep(t, b)
	require.EqualValues(t, wide, st.Aged)
	require.EqualValues(t, wide, st.Segments)
	require.Zero(t, segments(t, b, q))
	for _, c := range b.Cursors(t, q) {
		if c.Partition != "Default" {
			require.EqualValues(t, 1, c.Committed, "partition %s's cursor moves past what is gone", c.Partition)
		}
	}
	events, err := b.DB.RetentionEvents(t.Context(), b.Tenant, q)
	require.NoError(t, err)
	require.Len(t, events, wide, "one event per partition")
}

package db_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/domain/counters"
	"github.com/regent-mq/regent/broker/pg/db"
)

// m0 is a minute that is also the start of a 5-minute bucket.
var m0 = time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)

// minute records one replica's counters of one queue in one minute.
func (f *fixture) minute(tenant, queue, replica string, at time.Time, pushed, lagMax, parked int64) {
	f.t.Helper()
	f.exec(`INSERT INTO queen.queue_minutes (tenant, minute, queue, replica, push_messages, lag_max_ms, parked_sum,
			lag_count, lag_sum_ms)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $5, $5::bigint * $6::bigint)`, tenant, at, queue, replica, pushed, lagMax, parked)
}

type bucket struct {
	at             time.Time
	queue, replica string
	pushed, lagMax int64
}

func buckets(ms []db.QueueMinutes) []bucket {
	var out []bucket
	for _, m := range ms {
		out = append(out, bucket{m.Bucket.UTC(), m.Queue, m.Replica, m.N[counters.PushMessages], m.LagMax})
	}
	return out
}

func TestQueueMinutesSumEachBucketAndKeepReplicasAndQueuesApartOnlyAsAsked(t *testing.T) {
	f := newFixture(t)
	f.minute("acme", "q1", "r1", m0, 1, 10, 0)
	f.minute("acme", "q1", "r2", m0.Add(time.Minute), 2, 30, 5)
	f.minute("acme", "q2", "r1", m0.Add(4*time.Minute), 4, 20, 0)
	f.minute("acme", "q1", "r1", m0.Add(5*time.Minute), 8, 40, 0)
	f.minute("acme", "q1", "r1", m0.Add(time.Hour), 100, 1, 0) // after the window
	f.minute("other", "q1", "r1", m0, 1000, 1, 0)
	w := db.Window{From: m0.Add(30 * time.Second), To: m0.Add(9 * time.Minute), Width: 5 * time.Minute}
	b2 := m0.Add(5 * time.Minute)

	for _, c := range []struct {
		name string
		edit func(*db.Window)
		want []bucket
	}{
		{"by bucket and queue", func(*db.Window) {}, []bucket{
			{m0, "q1", "", 3, 30}, {m0, "q2", "", 4, 20}, {b2, "q1", "", 8, 40}}},
		{"per replica", func(w *db.Window) { w.PerReplica = true }, []bucket{
			{m0, "q1", "r1", 1, 10}, {m0, "q1", "r2", 2, 30}, {m0, "q2", "r1", 4, 20}, {b2, "q1", "r1", 8, 40}}},
		{"across queues", func(w *db.Window) { w.AcrossQueues = true }, []bucket{{m0, "", "", 7, 30}, {b2, "", "", 8, 40}}},
		{"one queue", func(w *db.Window) { w.Queue = "q2" }, []bucket{{m0, "q2", "", 4, 20}}},
		{"some queues", func(w *db.Window) { w.Queues = []string{"q2"} }, []bucket{{m0, "q2", "", 4, 20}}},
		{"no queue", func(w *db.Window) { w.Queues = []string{} }, nil},
		{"one replica", func(w *db.Window) { w.Replica = "r2" }, []bucket{{m0, "q1", "", 2, 30}}},
		{"parked", func(w *db.Window) { w.Parked = true }, []bucket{{m0, "q1", "", 2, 30}}},
	} {
		w := w
		c.edit(&w)
		ms, err := f.db.QueueMinutes(f.ctx, "acme", w)
		require.NoError(t, err)
		require.Equal(t, c.want, buckets(ms), c.name)
	}
}

func TestLagMinutesAreEachQueuesMinutesWithPopsNewestFirst(t *testing.T) {
	f := newFixture(t)
	f.minute("acme", "q1", "r1", m0, 2, 10, 0)
	f.minute("acme", "q1", "r2", m0, 3, 30, 0)
	f.minute("acme", "q2", "r1", m0.Add(time.Minute), 1, 5, 0)
	f.minute("acme", "q2", "r1", m0.Add(2*time.Minute), 0, 0, 0) // no pop
	f.minute("other", "q1", "r1", m0, 7, 1, 0)

	ls, err := f.db.LagMinutes(f.ctx, "acme", db.Window{From: m0, To: m0.Add(time.Hour)})
	require.NoError(t, err)
	require.Len(t, ls, 2)
	require.Equal(t, "q2", ls[0].Queue)
	require.Equal(t, db.LagMinute{Queue: "q1", Minute: ls[1].Minute, Pops: 5, LagSum: 2*10 + 3*30, LagMax: 30}, ls[1])
	require.True(t, ls[1].Minute.Equal(m0))
}

func TestPartitionsCreatedCountByBucketAndTheOlderInTheFirst(t *testing.T) {
	f := newFixture(t)
	q := f.queue("acme", "orders")
	for i, at := range []time.Time{m0.Add(-time.Hour), m0.Add(time.Minute), m0.Add(6 * time.Minute), m0.Add(time.Hour)} {
		p := f.partition(q, string(rune('a'+i)))
		f.exec(`UPDATE queen.partitions SET created_at = $2 WHERE id = $1`, p, at)
	}
	f.partition(f.queue("other", "orders"), "a")

	got, err := f.db.PartitionsCreated(f.ctx, "acme",
		db.Window{From: m0, To: m0.Add(10 * time.Minute), Width: 5 * time.Minute}, []string{"orders", "missing"})
	require.NoError(t, err)
	require.Equal(t, map[string]map[int64]int64{"orders": {m0.Unix(): 2, m0.Add(5 * time.Minute).Unix(): 1}}, got)
}

func TestStoredCountsCountTheFramesStillStoredByTheBucketOfTheirCreation(t *testing.T) {
	f := newFixture(t)
	orders, invoices := f.queue("acme", "orders"), f.queue("acme", "invoices")
	f.exec(`UPDATE queen.queues SET namespace = 'billing' WHERE id = $1`, invoices)
	po, pi := f.partition(orders, "a"), f.partition(invoices, "a")
	f.push(po, m0.Add(time.Minute), "1", "2")
	f.push(po, m0.Add(6*time.Minute), "3")
	f.push(pi, m0.Add(2*time.Minute), "4")
	f.push(po, m0.Add(-time.Hour), "old")
	f.push(f.partition(f.queue("other", "orders"), "a"), m0, "x")
	w := db.Window{From: m0, To: m0.Add(10 * time.Minute), Width: 5 * time.Minute}

	got, err := f.db.StoredCounts(f.ctx, "acme", w, "", "")
	require.NoError(t, err)
	require.Equal(t, map[int64]int64{m0.Unix(): 3, m0.Add(5 * time.Minute).Unix(): 1}, got)
	got, err = f.db.StoredCounts(f.ctx, "acme", w, "billing", "")
	require.NoError(t, err)
	require.Equal(t, map[int64]int64{m0.Unix(): 1}, got)
	w.Queue = "orders"
	got, err = f.db.StoredCounts(f.ctx, "acme", w, "", "")
	require.NoError(t, err)
	require.Equal(t, map[int64]int64{m0.Unix(): 2, m0.Add(5 * time.Minute).Unix(): 1}, got)
}

func TestRetentionBucketsSplitWhatRetentionRemovedByKind(t *testing.T) {
	f := newFixture(t)
	p := uuid.New()
	for _, e := range []struct {
		tenant, queue, kind string
		at                  time.Time
		n                   int64
	}{
		{"acme", "q1", "retention", m0, 1},
		{"acme", "q1", "completed_retention", m0.Add(time.Minute), 2},
		{"acme", "q2", "eviction", m0.Add(2 * time.Minute), 4},
		{"acme", "q1", "retention", m0.Add(5 * time.Minute), 8},
		{"other", "q1", "retention", m0, 16},
	} {
		f.exec(`INSERT INTO queen.retention_events (tenant, at, queue, partition_id, kind, messages) VALUES ($1, $2, $3, $4, $5, $6)`,
			e.tenant, e.at, e.queue, p, e.kind, e.n)
	}
	w := db.Window{From: m0, To: m0.Add(10 * time.Minute), Width: 5 * time.Minute}

	bs, err := f.db.RetentionBuckets(f.ctx, "acme", w)
	require.NoError(t, err)
	require.Len(t, bs, 2)
	require.Equal(t, db.RetentionBucket{Bucket: bs[0].Bucket, Retention: 1, Completed: 2, Evicted: 4, Events: 3}, bs[0])
	require.Equal(t, db.RetentionBucket{Bucket: bs[1].Bucket, Retention: 8, Events: 1}, bs[1])
	w.Queue = "q2"
	bs, err = f.db.RetentionBuckets(f.ctx, "acme", w)
	require.NoError(t, err)
	require.Equal(t, []db.RetentionBucket{{Bucket: bs[0].Bucket, Evicted: 4, Events: 1}}, bs)
}

func TestReplicaSamplesAreTheWindowsByReplicaAndMinute(t *testing.T) {
	f := newFixture(t)
	for _, s := range []struct {
		replica string
		at      time.Time
	}{{"r2", m0}, {"r1", m0.Add(time.Minute)}, {"r1", m0}, {"r1", m0.Add(time.Hour)}} {
		f.exec(`INSERT INTO queen.replica_samples (replica, minute, sampled_at, cpu_user_pct, cpu_sys_pct, rss_bytes,
				virtual_bytes, pool_size, pool_idle, pool_active)
			VALUES ($1, $2, $2, 1.5, 0.5, 100, 200, 10, 7, 3)`, s.replica, s.at)
	}
	w := db.Window{From: m0.Add(30 * time.Second), To: m0.Add(5 * time.Minute)}

	ss, err := f.db.ReplicaSamples(f.ctx, w)
	require.NoError(t, err)
	var got []string
	for _, s := range ss {
		got = append(got, s.Replica+"@"+s.Minute.UTC().Format("15:04"))
	}
	require.Equal(t, []string{"r1@03:05", "r1@03:06", "r2@03:05"}, got, "the minute the window starts in counts")
	require.Equal(t, db.ReplicaSample{Replica: "r1", Minute: ss[0].Minute, SampledAt: ss[0].SampledAt, CPUUser: 1.5, CPUSys: 0.5,
		RSS: 100, Virtual: 200, PoolSize: 10, PoolIdle: 7, PoolActive: 3}, ss[0])
	w.Replica = "r2"
	ss, err = f.db.ReplicaSamples(f.ctx, w)
	require.NoError(t, err)
	require.Len(t, ss, 1)
}

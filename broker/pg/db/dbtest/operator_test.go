package dbtest_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/domain/backlog"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestStreamQueryArrangementsTouchOnlyTheQueryNamed(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	tenant := b.Q("tenant")
	id, q, err := b.DB.StreamQueryNamed(t.Context(), tenant, "q")
	require.NoError(t, err)
	require.Empty(t, id)
	require.False(t, q.Exists)

	id, err = b.DB.PutStreamQuery(t.Context(), tenant, "q", "orders")
	require.NoError(t, err)
	other, err := b.DB.PutStreamQuery(t.Context(), tenant, "other", "orders")
	require.NoError(t, err)
	got, q, err := b.DB.StreamQueryNamed(t.Context(), tenant, "q")
	require.NoError(t, err)
	require.Equal(t, id, got)
	require.Equal(t, "orders", q.Source)

	sink := "out"
	require.NoError(t, b.DB.MoveStreamQuery(t.Context(), tenant, "q", "elsewhere", &sink))
	require.Error(t, b.DB.MoveStreamQuery(t.Context(), tenant, "none", "elsewhere", nil))
	q = b.StreamQuery(t, id)
	require.Equal(t, "elsewhere", q.Source)
	require.Equal(t, &sink, q.Sink)
	require.Equal(t, "orders", b.StreamQuery(t, other).Source)

	require.NoError(t, b.DB.PutStateRows(t.Context(), id, 7))
	usage, err := celldb.New(b.Pool).Usage(t.Context(), tenant, time.Minute)
	require.NoError(t, err)
	require.EqualValues(t, 7, usage.StateRows)
	require.EqualValues(t, 2, usage.Queries)
}

func TestQuotaReadsTheRowTheOperatorApplies(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	tenant := b.Q("tenant")
	q, err := b.DB.Quota(t.Context(), tenant)
	require.NoError(t, err)
	require.False(t, q.Exists)
	max, queues := int32(3), int32(10)
	_, err = celldb.New(b.Pool).ApplyQuota(t.Context(), celldb.Quota{Tenant: tenant, Enabled: true, MaxQueries: &max, MaxQueues: &queues})
	require.NoError(t, err)
	q, err = b.DB.Quota(t.Context(), tenant)
	require.NoError(t, err)
	require.True(t, q.Exists && q.Enabled)
	require.Equal(t, &max, q.MaxQueries)
	require.Equal(t, new(int64(10)), q.MaxQueues)
	require.Nil(t, q.PushMessagesPerSecond)
}

func TestNowIsTheDatabasesClockAndBackendItsServer(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	now, err := b.DB.Now(t.Context())
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), now, time.Minute)
	pid, err := b.DB.Backend(t.Context())
	require.NoError(t, err)
	require.Positive(t, pid)
}

// Not parallel: it counts every tenant's queries.
func TestStreamQueriesByTenantCountsEveryTenantsQueries(t *testing.T) {
	b := brokertest.Shared(t)
	a, c := b.Q("a"), b.Q("c")
	for _, r := range [][2]string{{a, "x"}, {a, "y"}, {c, "x"}} {
		_, err := b.DB.PutStreamQuery(t.Context(), r[0], r[1], "orders")
		require.NoError(t, err)
	}
	x, err := b.DB.StreamQueriesByTenant(t.Context(), "x")
	require.NoError(t, err)
	require.Equal(t, 1, x[a])
	require.Equal(t, 1, x[c])
	all, err := b.DB.StreamQueriesByTenant(t.Context(), "")
	require.NoError(t, err)
	require.Equal(t, 2, all[a])
}

// Not parallel: it counts every query's state.
func TestGroupCommittedAndCountStateSumOverEveryQueue(t *testing.T) {
	b := brokertest.Shared(t)
	q1, q2, group := b.Q("q1"), b.Q("q2"), b.Q("g")
	for _, q := range []string{q1, q2} {
		b.PushN(t, q, "p", 0, 5)
		b.PlaceCursor(t, q, "p", group, 2)
	}
	n, err := b.DB.GroupCommitted(t.Context(), group)
	require.NoError(t, err)
	require.EqualValues(t, 4, n)

	before, err := b.DB.CountState(t.Context(), "clock")
	require.NoError(t, err)
	id, err := b.DB.PutStreamQuery(t.Context(), b.Tenant, b.Q("query"), q1)
	require.NoError(t, err)
	for _, key := range []string{"a", "clock"} {
		b.PutState(t, id, "0193f0c5-0000-7000-8000-000000000001", key, `{}`)
	}
	after, err := b.DB.CountState(t.Context(), "clock")
	require.NoError(t, err)
	require.Equal(t, before+1, after)
}

func TestStateOfListsEveryPartitionsRowsThoughTheyShareKeys(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	id, err := b.DB.PutStreamQuery(t.Context(), b.Tenant, b.Q("query"), b.Q("src"))
	require.NoError(t, err)
	p1, p2 := "0193f0c5-0000-7000-8000-000000000001", "0193f0c5-0000-7000-8000-000000000002"
	b.PutState(t, id, p1, "k", `{"n": 1}`)
	b.PutState(t, id, p2, "k", `{"n": 2}`)
	rows, err := b.DB.StateOf(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, []dbtest.StateRow{{Partition: p1, Key: "k", Value: `{"n": 1}`}, {Partition: p2, Key: "k", Value: `{"n": 2}`}}, rows)
}

func TestQueuesListsOnlyTheTenantsQueues(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	tenant := b.Q("tenant")
	names, err := b.DB.Queues(t.Context(), tenant)
	require.NoError(t, err)
	require.Empty(t, names)
	b.PushN(t, b.Q("q"), "p", 0, 1)
	names, err = b.DB.Queues(t.Context(), b.Tenant)
	require.NoError(t, err)
	require.Contains(t, names, b.Q("q"))
	_, err = b.DB.Metered(t.Context())
	require.NoError(t, err)
}

func TestLagSamplesListWhatARefreshSampled(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "p", 0, 3)
	b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/p?consumerGroup=g&autoAck=true")
	samples, err := b.DB.LagSamples(t.Context(), b.Tenant, q, "g")
	require.NoError(t, err)
	require.Empty(t, samples)
	require.True(t, backlog.New(db.New(b.Pool), metrics.New(), slog.New(slog.DiscardHandler)).Refresh(t.Context()))
	samples, err = b.DB.LagSamples(t.Context(), b.Tenant, q, "g")
	require.NoError(t, err)
	require.Len(t, samples, 1)
	require.EqualValues(t, 2, samples[0].Lag)
}

package dbtest_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/broker/pg/migrate"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

// tenants is a broker with tenancy on in either mode: each test a tenant.
var tenants = brokertest.NewGroup(brokertest.WithJWT(true))

func TestDumpChangesWithTheTenantsOwnDataOnly(t *testing.T) {
	t.Parallel()
	b := tenants.Shared(t)
	dump := func() string {
		t.Helper()
		s, err := b.DB.Dump(t.Context(), b.Tenant)
		require.NoError(t, err)
		return s
	}
	empty := dump()
	b.PushN(t, "q", "p", 0, 2)
	pushed := dump()
	require.NotEqual(t, empty, pushed)
	other := brokertest.Mint(t, b.Tenant+"-other", auth.Admin)
	r := b.Do(t, "POST", "/api/v1/push", other, map[string]any{"items": brokertest.Numbered("q", "p", 0, 1)})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	require.Equal(t, pushed, dump(), "another tenant's push")
	b.Pop(t, "/api/v1/pop/queue/q?batch=1")
	require.NotEqual(t, pushed, dump(), "a lease is the tenant's data")
}

func TestPutQueryMinuteIsCountedInTheQuerysCycles(t *testing.T) {
	t.Parallel()
	b := tenants.Shared(t)
	b.Grant(t, b.Tenant, nil)
	id := b.Call(t, http.StatusOK, "POST", "/streams/v1/queries", map[string]any{"name": "q", "source_queue": "src", "config_hash": "h"}).Map(t)["query_id"].(string)
	at := time.Now().Add(-time.Hour).Truncate(time.Minute)
	require.NoError(t, b.DB.PutQueryMinute(t.Context(), dbtest.QueryMinute{Tenant: b.Tenant, QueryID: id, Replica: "r", Minute: at, Cycles: 4, Refused: 1}))
	got := series(t, b, "/api/v1/analytics/query-cycles?queryId="+id+"&"+around(at))
	require.Len(t, got, 1)
	require.Equal(t, 4.0, got[0]["cycles"])
	require.Equal(t, 1.0, got[0]["refused"])
}

func TestObjectsCountsTheQueuesAndQueriesOfEveryTenant(t *testing.T) {
	// Not parallel: no other test makes or deletes anything meanwhile.
	b := tenants.Shared(t)
	b.Grant(t, b.Tenant, nil)
	before, err := b.DB.Objects(t.Context())
	require.NoError(t, err)
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": "q"})
	b.Call(t, http.StatusOK, "POST", "/streams/v1/queries", map[string]any{"name": "n", "source_queue": "q", "config_hash": "h"})
	after, err := b.DB.Objects(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, after-before)
}

func TestMigrationsListsTheRecordAndForgettingLeavesTheSchemaBehind(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	d := dbtest.New(pool)
	current, err := migrate.Current(t.Context(), pool)
	require.NoError(t, err)
	require.True(t, current)
	all, err := migrate.All()
	require.NoError(t, err)
	recorded, err := d.Migrations(t.Context())
	require.NoError(t, err)
	require.Len(t, recorded, len(all))
	for i, m := range all {
		require.Equal(t, m.Version, recorded[i])
	}
	v, err := d.ForgetLatestMigration(t.Context())
	require.NoError(t, err)
	require.Equal(t, all[len(all)-1].Version, v)
	recorded, err = d.Migrations(t.Context())
	require.NoError(t, err)
	require.Len(t, recorded, len(all)-1)
	current, err = migrate.Current(t.Context(), pool)
	require.NoError(t, err)
	require.False(t, current)
	require.NoError(t, d.ForgetMigrations(t.Context()))
	current, err = migrate.Current(t.Context(), pool)
	require.NoError(t, err)
	require.False(t, current)
}

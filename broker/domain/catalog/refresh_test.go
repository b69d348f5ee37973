package catalog_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/broker/pg/migrate"
	"github.com/regent-mq/regent/test/citustest"
	"github.com/regent-mq/regent/test/pgtest"
)

// TestAPartitionPastItsTTLIsReadAgainWithItsQueuesOptions: past optionsTTL
// a cached partition keeps its id and takes its queue's options as they
// are now, whether it is resolved, looked up by name or by id.
func TestAPartitionPastItsTTLIsReadAgainWithItsQueuesOptions(t *testing.T) {
	t.Parallel()
	cat, d := newCatalog(t)
	ctx := context.Background()
	tg := catalog.Target{Tenant: "default", Queue: "q", Partition: "p"}
	p, err := cat.Resolve(ctx, tg)
	require.NoError(t, err)
	opts, err := d.QueueDefaults(ctx)
	require.NoError(t, err)
	for i, lookup := range []func() (*catalog.Partition, error){
		func() (*catalog.Partition, error) { return cat.Resolve(ctx, tg) },
		func() (*catalog.Partition, error) { return cat.LookupPartition(ctx, tg.Tenant, tg.Queue, tg.Partition) },
		func() (*catalog.Partition, error) { return cat.OwnedPartition(ctx, tg.Tenant, p.ID) },
	} {
		opts.LeaseTime = 100 + i
		_, _, err := d.ConfigureQueue(ctx, "default", "q", nil, nil, &opts)
		require.NoError(t, err)
		cat.Expire("default", "q")
		got, err := lookup()
		require.NoError(t, err)
		require.Equal(t, p.ID, got.ID)
		require.Equal(t, 100+i, got.Queue.LeaseTime, "lookup %d: the options configured since", i)
	}
}

// TestAPartitionDeletedBehindTheCatalogIsLookedUpByNamePastItsTTL: a
// partition that another replica (or the retention sweep) deleted is not
// answered by its old id once its TTL is past: a push's resolve makes it
// again, and a pop's lookup finds nothing.
func TestAPartitionDeletedBehindTheCatalogIsLookedUpByNamePastItsTTL(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	d := db.New(pool)
	cat := catalog.New(d, config.DefaultCatalogSize)
	ctx := context.Background()
	tg := catalog.Target{Tenant: "default", Queue: "q", Partition: "p"}
	old, err := cat.Resolve(ctx, tg)
	require.NoError(t, err)
	require.NoError(t, dbtest.New(pool).DeletePartition(ctx, "default", "q", "p"))
	cat.Expire("default", "q")
	_, err = cat.LookupPartition(ctx, tg.Tenant, tg.Queue, tg.Partition)
	require.ErrorIs(t, err, catalog.ErrNotFound)
	again, err := cat.Resolve(ctx, tg)
	require.NoError(t, err)
	require.NotEqual(t, old.ID, again.ID, "made again, with a new id")

	// Its queue deleted and made again: the partition of the same name is
	// the new queue's.
	_, err = d.DeleteQueue(ctx, "default", "q")
	require.NoError(t, err)
	fresh := catalog.New(d, config.DefaultCatalogSize)
	remade, err := fresh.Resolve(ctx, tg)
	require.NoError(t, err)
	cat.Expire("default", "q")
	got, err := cat.LookupPartition(ctx, tg.Tenant, tg.Queue, tg.Partition)
	require.NoError(t, err)
	require.Equal(t, remade.ID, got.ID)
	require.Equal(t, remade.Queue.ID, got.Queue.ID)
}

// TestWhileACitusNodeIsDownTheOtherNodesPartitionsAreServedPastTheirTTL:
// on Citus, with a worker down, the catalog reads a partition of the other
// worker again past optionsTTL (a statement on its shard alone), where a
// lookup by name would read every shard and fail; the down worker's own
// partitions fail.
func TestWhileACitusNodeIsDownTheOtherNodesPartitionsAreServedPastTheirTTL(t *testing.T) {
	t.Parallel()
	c := citustest.New(t, 2)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, c.URL().String())
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = migrate.Up(ctx, pool, nil)
	require.NoError(t, err)
	cat := catalog.New(db.New(pool), config.DefaultCatalogSize)

	// A partition on each worker.
	byPort := map[int]*catalog.Partition{}
	for i := 0; len(byPort) < 2; i++ {
		require.Less(t, i, 64, "64 partitions all landed on one worker")
		p, err := cat.Resolve(ctx, catalog.Target{Tenant: "default", Queue: "q", Partition: uuid.NewString()})
		require.NoError(t, err)
		var port int
		require.NoError(t, pool.QueryRow(ctx, `SELECT nodeport FROM citus_shards
			WHERE shardid = get_shard_id_for_distribution_column('queen.partitions', $1::uuid)`, p.ID).Scan(&port))
		byPort[port] = p
	}
	down := c.Workers[0]
	down.Crash()
	live, dead := byPort[c.Workers[1].Port], byPort[down.Port]

	cat.Expire("default", "q")
	got, err := cat.Resolve(ctx, catalog.Target{Tenant: "default", Queue: "q", Partition: live.Name})
	require.NoError(t, err, "a resolve of the live worker's partition")
	require.Equal(t, live.ID, got.ID)
	cat.Expire("default", "q")
	got, err = cat.LookupPartition(ctx, "default", "q", live.Name)
	require.NoError(t, err, "a lookup of the live worker's partition")
	require.Equal(t, live.ID, got.ID)
	cat.Expire("default", "q")
	_, err = cat.LookupPartition(ctx, "default", "q", dead.Name)
	require.Error(t, err, "a lookup of the down worker's partition")
	require.NotErrorIs(t, err, catalog.ErrNotFound, "the down worker's partition is unreachable, not gone")
}

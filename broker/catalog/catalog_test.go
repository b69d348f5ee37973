package catalog_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/catalog"
	"github.com/regent-mq/regent/broker/db"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newCatalog returns an empty catalog over a database of its own.
func newCatalog(t *testing.T) (*catalog.Catalog, *db.DB) {
	t.Helper()
	d := db.New(pgtest.New(t))
	return catalog.New(d), d
}

func TestResolveCachesAndCreatesOnce(t *testing.T) {
	t.Parallel()
	cat, _ := newCatalog(t)
	ctx := context.Background()
	a, err := cat.Resolve(ctx, catalog.Target{Tenant: "default", Queue: "q", Partition: "p"})
	require.NoError(t, err)
	b, err := cat.Resolve(ctx, catalog.Target{Tenant: "default", Queue: "q", Partition: "p"})
	require.NoError(t, err)
	require.Same(t, a, b)
	c, err := cat.Resolve(ctx, catalog.Target{Tenant: "acme", Queue: "q", Partition: "p"})
	require.NoError(t, err)
	require.NotEqual(t, a.Queue.ID, c.Queue.ID, "queue names are per tenant")
	var bad *catalog.BadName
	_, err = cat.Resolve(ctx, catalog.Target{Tenant: "default", Queue: "no spaces", Partition: "p"})
	require.ErrorAs(t, err, &bad)
}

func TestOwnedPartitionIsNotFoundForAnotherTenant(t *testing.T) {
	t.Parallel()
	cat, d := newCatalog(t)
	ctx := context.Background()
	p, err := cat.Resolve(ctx, catalog.Target{Tenant: "acme", Queue: "q", Partition: "p"})
	require.NoError(t, err)
	got, err := cat.OwnedPartition(ctx, "acme", p.ID)
	require.NoError(t, err)
	require.Equal(t, p.ID, got.ID)
	_, err = cat.OwnedPartition(ctx, "other", p.ID)
	require.True(t, errors.Is(err, catalog.ErrNotFound))
	_, err = cat.OwnedPartition(ctx, "acme", uuid.New())
	require.True(t, errors.Is(err, catalog.ErrNotFound))
	// Uncached: a second catalog reads the database.
	s2 := catalog.New(d)
	_, err = s2.OwnedPartition(ctx, "other", p.ID)
	require.True(t, errors.Is(err, catalog.ErrNotFound))
	got, err = s2.OwnedPartition(ctx, "acme", p.ID)
	require.NoError(t, err)
	require.Equal(t, "p", got.Name)
	require.Equal(t, "q", got.Queue.Name)
}

func TestANewPartitionOfACachedQueueLeavesItsOtherPartitionsCached(t *testing.T) {
	t.Parallel()
	cat, _ := newCatalog(t)
	ctx := context.Background()
	a, err := cat.Resolve(ctx, catalog.Target{Tenant: "default", Queue: "q", Partition: "a"})
	require.NoError(t, err)
	b, err := cat.Resolve(ctx, catalog.Target{Tenant: "default", Queue: "q", Partition: "b"})
	require.NoError(t, err)
	require.Same(t, a.Queue, b.Queue, "the new partition takes the options in force")
	again, err := cat.Resolve(ctx, catalog.Target{Tenant: "default", Queue: "q", Partition: "a"})
	require.NoError(t, err)
	require.Same(t, a, again, "a new partition refreshed the queue and replaced the cached ones")
}

package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

// newCatalog returns an empty catalog over a database of its own.
func newCatalog(t *testing.T) (*catalog.Catalog, *db.DB) {
	t.Helper()
	d := db.New(pgtest.New(t))
	return catalog.New(d, config.DefaultCatalogSize), d
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
	s2 := catalog.New(d, config.DefaultCatalogSize)
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

// TestCatalogEvictsTheLeastRecentlyUsedAndAnswersTheSame: with a bound
// smaller than the partitions in use, the cache never holds more than the
// bound, every answer is what the database holds, and the entries used
// last survive an eviction.
func TestCatalogEvictsTheLeastRecentlyUsedAndAnswersTheSame(t *testing.T) {
	t.Parallel()
	const size, queues, parts = 16, 5, 12
	d := db.New(pgtest.New(t))
	ctx := context.Background()
	truth := catalog.New(d, config.DefaultCatalogSize)
	want := map[catalog.Target]uuid.UUID{}
	var targets []catalog.Target
	for q := range queues {
		for p := range parts {
			tg := catalog.Target{Tenant: "acme", Queue: fmt.Sprintf("q%d", q), Partition: fmt.Sprintf("p%d", p)}
			got, err := truth.Resolve(ctx, tg)
			require.NoError(t, err)
			want[tg] = got.ID
			targets = append(targets, tg)
		}
	}

	cat := catalog.New(d, size)
	check := func() {
		t.Helper()
		nq, np := cat.Len()
		require.LessOrEqual(t, nq, size, "queues cached")
		require.LessOrEqual(t, np, size, "partitions cached")
	}
	for round := range 3 {
		for i, tg := range targets {
			var p *catalog.Partition
			var err error
			switch (i + round) % 3 {
			case 0:
				p, err = cat.Resolve(ctx, tg)
			case 1:
				p, err = cat.LookupPartition(ctx, tg.Tenant, tg.Queue, tg.Partition)
			default:
				p, err = cat.OwnedPartition(ctx, tg.Tenant, want[tg])
			}
			require.NoError(t, err)
			require.Equal(t, want[tg], p.ID, "%v", tg)
			require.Equal(t, tg.Partition, p.Name)
			require.Equal(t, tg.Queue, p.Queue.Name)
			check()
			_, err = cat.OwnedPartition(ctx, "other", want[tg])
			require.ErrorIs(t, err, catalog.ErrNotFound, "eviction opened no door to another tenant")
			check()
		}
	}

	// The partitions used last stay cached while the cache turns over.
	hot := targets[0]
	first, err := cat.Resolve(ctx, hot)
	require.NoError(t, err)
	for _, tg := range targets[len(targets)-size/2:] {
		_, err := cat.Resolve(ctx, tg)
		require.NoError(t, err)
		again, err := cat.Resolve(ctx, hot)
		require.NoError(t, err)
		require.Same(t, first, again, "the most recently used partition was evicted")
		check()
	}
}

// TestARefreshOfAQueueRebindsItsPartitionsAndNoOthers: a queue's options,
// read again, reach every cached partition of it, and no partition of
// another queue is replaced.
func TestARefreshOfAQueueRebindsItsPartitionsAndNoOthers(t *testing.T) {
	t.Parallel()
	cat, _ := newCatalog(t)
	ctx := context.Background()
	resolve := func(q, p string) *catalog.Partition {
		t.Helper()
		got, err := cat.Resolve(ctx, catalog.Target{Tenant: "default", Queue: q, Partition: p})
		require.NoError(t, err)
		return got
	}
	a1, a2, b1 := resolve("a", "1"), resolve("a", "2"), resolve("b", "1")
	cat.Refresh("default", "a")
	fresh1, fresh2 := resolve("a", "1"), resolve("a", "2")
	require.NotSame(t, a1.Queue, fresh1.Queue, "the refreshed options")
	require.Same(t, fresh1.Queue, fresh2.Queue, "every partition of the queue takes them")
	require.Equal(t, a2.ID, fresh2.ID)
	require.Same(t, b1, resolve("b", "1"), "another queue's partition is left as it was")
	nq, np := cat.Len()
	require.Equal(t, 2, nq)
	require.Equal(t, 3, np)
}

// TestOwnsQueryIsFalseAlikeForAnotherTenantsAndForNone: a streaming query
// is its tenant's alone, from the database and from the cache, and an
// unknown id is no one's.
func TestOwnsQueryIsFalseAlikeForAnotherTenantsAndForNone(t *testing.T) {
	t.Parallel()
	cat, d := newCatalog(t)
	ctx := context.Background()
	reg, err := d.Register(ctx, db.Registration{Tenant: "default", Name: "sq", Source: "q", ConfigHash: "h"})
	require.NoError(t, err)
	for _, tc := range []struct {
		tenant string
		id     uuid.UUID
		want   bool
	}{{"default", reg.QueryID, true}, {"other", reg.QueryID, false}, {"default", uuid.New(), false}, {"default", reg.QueryID, true}} {
		got, err := cat.OwnsQuery(ctx, tc.tenant, tc.id)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "tenant %s, query %s", tc.tenant, tc.id)
	}
	unknown, err := cat.OwnsQuery(ctx, "default", uuid.Nil)
	require.NoError(t, err)
	require.False(t, unknown)
}

// TestQueryOwnersStayWithinTheCatalogsSize: the owners cached never pass
// the catalog's size, and each answer stays right as they turn over.
func TestQueryOwnersStayWithinTheCatalogsSize(t *testing.T) {
	t.Parallel()
	d := db.New(pgtest.New(t))
	cat := catalog.New(d, 2)
	ctx := context.Background()
	for i := range 5 {
		reg, err := d.Register(ctx, db.Registration{Tenant: "default", Name: fmt.Sprintf("sq%d", i), Source: "q", ConfigHash: "h"})
		require.NoError(t, err)
		for _, tenant := range []string{"default", "other"} {
			owns, err := cat.OwnsQuery(ctx, tenant, reg.QueryID)
			require.NoError(t, err)
			require.Equal(t, tenant == "default", owns)
			require.LessOrEqual(t, cat.Owners(), 2)
		}
	}
}

package db_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/pg/db"
)

// t0 is a fixed creation time for the fixtures' messages.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func moved(ms []db.MovedCursor) map[uuid.UUID]uuid.UUID {
	out := map[uuid.UUID]uuid.UUID{}
	for _, m := range ms {
		out[m.Partition] = m.Queue
	}
	return out
}

func TestSeekToEndMovesEachCursorPastItsPartitionsNewestMessageAndReleasesItsLease(t *testing.T) {
	f := newFixture(t)
	q := f.queue("acme", "orders")
	full, empty := f.partition(q, "full"), f.partition(q, "empty")
	f.segments(full, "a b", "c")
	f.cursor(full, "g", 0)
	f.lease(full, "g", 2, time.Now().Add(time.Minute), 2)
	f.cursor(empty, "g", 0)

	ms, err := f.db.SeekToEnd(f.ctx, "acme", "g", "orders")
	require.NoError(t, err)
	require.Equal(t, map[uuid.UUID]uuid.UUID{full: q}, moved(ms), "a partition without messages is left alone")
	c := f.cursorRow(full, "g")
	require.EqualValues(t, 3, c.Committed)
	require.False(t, c.Leased, "the lease goes")
	require.Zero(t, c.RetryCount, "and with it the retry count")
	require.Equal(t, []int64{0, 2}, []int64{*c.BatchStart, *c.BatchEnd}, "the batch bounds stay, for the acks of the old batch")
}

func TestSeekToATimeMovesJustAfterTheLastMessageCreatedAtOrBeforeIt(t *testing.T) {
	f := newFixture(t)
	q := f.queue("acme", "orders")
	p := f.partition(q, "p")
	f.segments(p, "a b", "c", "d")
	f.cursor(p, "g", 4)
	f.lease(p, "g", 4, time.Now().Add(time.Minute), 1)

	for _, c := range []struct {
		at   time.Time
		want int64
	}{
		{t0.Add(time.Minute), 3}, // past c, the last created at or before
		{t0.Add(90 * time.Second), 3},
		{t0.Add(-time.Second), 0}, // nothing that old: the beginning, without a subscription
		{t0.Add(2 * time.Minute), 4},
	} {
		at, want := c.at, c.want
		ms, err := f.db.SeekTo(f.ctx, "acme", "g", "orders", at)
		require.NoError(t, err)
		require.Equal(t, map[uuid.UUID]uuid.UUID{p: q}, moved(ms))
		c := f.cursorRow(p, "g")
		require.Equal(t, want, c.Committed, "seek to %s", at)
		require.False(t, c.Leased)
		require.Zero(t, c.RetryCount)
	}
}

// A seek to before every message of a partition goes where the group's
// first pop would start it: where the subscription starts, or the
// beginning; and what lies below the floor is deleted, so never there.
func TestASeekBeforeEveryMessageStartsWhereTheSubscriptionDoesButNeverBelowTheFloor(t *testing.T) {
	for _, c := range []struct {
		name         string
		subscription bool
		floor, want  int64
	}{
		{"no subscription", false, 0, 0},
		{"past the messages before the subscription's start", true, 0, 3},
		{"the floor", false, 2, 2},
		{"the subscription above the floor", true, 2, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			q := f.queue("acme", "orders")
			p := f.partition(q, "p")
			f.segments(p, "a", "b c", "d")
			if c.subscription {
				f.exec(`INSERT INTO queen.subscriptions (queue_id, consumer_group, starts_after, mode)
					VALUES ($1, 'g', $2, 'timestamp')`, q, t0.Add(90*time.Second))
			}
			f.exec(`UPDATE queen.partitions SET floor_offset = $2 WHERE id = $1`, p, c.floor)
			f.cursor(p, "g", 4)

			_, err := f.db.SeekTo(f.ctx, "acme", "g", "orders", t0.Add(-time.Hour))
			require.NoError(t, err)
			require.Equal(t, c.want, f.cursorRow(p, "g").Committed)
		})
	}
}

func TestASeekLeavesAPartitionTheGroupHasNotReachedAndOtherGroupsAlone(t *testing.T) {
	f := newFixture(t)
	q := f.queue("acme", "orders")
	reached, unreached := f.partition(q, "reached"), f.partition(q, "unreached")
	f.segments(reached, "a")
	f.segments(unreached, "b")
	f.cursor(reached, "g", 0)
	f.cursor(reached, "other", 0)

	ms, err := f.db.SeekToEnd(f.ctx, "acme", "g", "orders")
	require.NoError(t, err)
	require.Equal(t, map[uuid.UUID]uuid.UUID{reached: q}, moved(ms))
	var cursors int
	f.scan(`SELECT count(*) FROM queen.cursors WHERE partition_id = $1`, []any{unreached}, &cursors)
	require.Zero(t, cursors, "its first pop starts it")
	require.Zero(t, f.cursorRow(reached, "other").Committed)
}

func TestSeekPartitionToEndMovesThatPartitionAloneAndReportsItsNewestMessage(t *testing.T) {
	f := newFixture(t)
	q := f.queue("acme", "orders")
	p, other := f.partition(q, "p"), f.partition(q, "other")
	f.segments(p, "a", "b c")
	f.segments(other, "x")
	f.cursor(p, "g", 0)
	f.lease(p, "g", 1, time.Now().Add(time.Minute), 3)
	f.cursor(other, "g", 0)

	m, at, err := f.db.SeekPartitionToEnd(f.ctx, "acme", "g", "orders", "p")
	require.NoError(t, err)
	require.Equal(t, &db.MovedCursor{Queue: q, Partition: p}, m)
	require.True(t, at.Equal(t0.Add(time.Minute)), "the newest message's creation time, %s", at)
	c := f.cursorRow(p, "g")
	require.EqualValues(t, 3, c.Committed)
	require.False(t, c.Leased)
	require.Zero(t, c.RetryCount)
	require.Zero(t, f.cursorRow(other, "g").Committed)
}

func TestSeekPartitionToEndMovesNothingWithoutACursorOrAMessage(t *testing.T) {
	f := newFixture(t)
	q := f.queue("acme", "orders")
	empty, unreached := f.partition(q, "empty"), f.partition(q, "unreached")
	f.cursor(empty, "g", 0)
	f.segments(unreached, "a")

	for _, name := range []string{"empty", "unreached"} {
		m, at, err := f.db.SeekPartitionToEnd(f.ctx, "acme", "g", "orders", name)
		require.NoError(t, err)
		require.Nil(t, m, name)
		require.Nil(t, at, name)
	}
}

func TestSeekPartitionToEndOfAnUnknownOrAnotherTenantsPartitionIsErrNoSuchPartition(t *testing.T) {
	f := newFixture(t)
	p := f.partition(f.queue("other", "orders"), "p")
	f.segments(p, "a")
	f.cursor(p, "g", 0)

	for _, c := range [][2]string{{"orders", "p"}, {"orders", "missing"}, {"missing", "p"}} {
		_, _, err := f.db.SeekPartitionToEnd(f.ctx, "acme", "g", c[0], c[1])
		require.True(t, errors.Is(err, db.ErrNoSuchPartition), "%v: %v", c, err)
	}
	require.Zero(t, f.cursorRow(p, "g").Committed)
}

func TestSeeksStayInsideTheirTenant(t *testing.T) {
	f := newFixture(t)
	p := f.partition(f.queue("other", "orders"), "p")
	f.segments(p, "a")
	f.cursor(p, "g", 0)

	ms, err := f.db.SeekToEnd(f.ctx, "acme", "g", "orders")
	require.NoError(t, err)
	require.Empty(t, ms)
	ms, err = f.db.SeekTo(f.ctx, "acme", "g", "orders", t0)
	require.NoError(t, err)
	require.Empty(t, ms)
	require.Zero(t, f.cursorRow(p, "g").Committed)
}

func TestDeleteGroupDeletesItsCursorsAndWithTheMetadataItsSubscriptions(t *testing.T) {
	f := newFixture(t)
	orders, invoices := f.queue("acme", "orders"), f.queue("acme", "invoices")
	po, pi := f.partition(orders, "p"), f.partition(invoices, "p")
	foreign := f.partition(f.queue("other", "orders"), "p")
	for _, p := range []uuid.UUID{po, pi, foreign} {
		f.cursor(p, "g", 0)
	}
	for _, q := range []uuid.UUID{orders, invoices} {
		f.exec(`INSERT INTO queen.subscriptions (queue_id, consumer_group, starts_after) VALUES ($1, 'g', now())`, q)
	}
	count := func(table string) (n int) {
		f.scan(`SELECT count(*) FROM queen.`+table+` WHERE consumer_group = 'g'`, nil, &n)
		return n
	}

	queue := "orders"
	ms, err := f.db.DeleteGroup(f.ctx, "acme", "g", &queue, false)
	require.NoError(t, err)
	require.Equal(t, map[uuid.UUID]uuid.UUID{po: orders}, moved(ms))
	require.Equal(t, 2, count("cursors"))
	require.Equal(t, 2, count("subscriptions"), "the metadata stays when not asked")

	ms, err = f.db.DeleteGroup(f.ctx, "acme", "g", nil, true)
	require.NoError(t, err)
	require.Equal(t, map[uuid.UUID]uuid.UUID{pi: invoices}, moved(ms))
	require.Equal(t, 1, count("cursors"), "another tenant's group of that name stays")
	require.Zero(t, count("subscriptions"))
}

func TestConsumerGroupsSumTheLagOfEachGroupOnEachQueue(t *testing.T) {
	f := newFixture(t)
	q := f.queue("acme", "orders")
	a, b := f.partition(q, "a"), f.partition(q, "b")
	f.segments(a, "1 2 3", "4")
	f.push(b, t0.Add(2*time.Minute), "5", "6")
	f.cursor(a, "g", 3) // behind by 1, since t0+1m
	f.cursor(b, "g", 2) // caught up
	f.cursor(f.partition(f.queue("other", "orders"), "p"), "g", 0)

	gs, err := f.db.ConsumerGroups(f.ctx, "acme")
	require.NoError(t, err)
	require.Len(t, gs, 1, "another tenant's groups are not listed")
	g := gs[0]
	require.Equal(t, "g", g.Name)
	require.Equal(t, "orders", g.Queue)
	require.Equal(t, 2, g.Members)
	require.Equal(t, 1, g.WithLag)
	require.EqualValues(t, 1, g.LagMessages)
	require.True(t, g.Oldest.Equal(t0.Add(time.Minute)), "%s", g.Oldest)
	require.Nil(t, g.SubMode, "no subscription")

	cs, err := f.db.GroupCursors(f.ctx, "acme", "g")
	require.NoError(t, err)
	require.Len(t, cs, 2)
	require.Equal(t, []string{"a", "b"}, []string{cs[0].Partition, cs[1].Partition})
	require.EqualValues(t, 1, cs[0].OffsetLag)
	require.Zero(t, cs[1].OffsetLag)

	lagging, err := f.db.LaggingCursors(f.ctx, "acme", time.Hour)
	require.NoError(t, err)
	require.Len(t, lagging, 1, "t0 is far older than an hour")
	require.Equal(t, a, lagging[0].PartitionID)
}

func TestSetSubscriptionStartMovesEveryRecordedSubscriptionButModeAll(t *testing.T) {
	f := newFixture(t)
	orders, all := f.queue("acme", "orders"), f.queue("acme", "all")
	f.exec(`INSERT INTO queen.subscriptions (queue_id, consumer_group, starts_after, created_at) VALUES ($1, 'g', $2, $2)`, orders, t0)
	f.exec(`INSERT INTO queen.subscriptions (queue_id, consumer_group, starts_after) VALUES ($1, 'g', '-infinity')`, all)

	n, err := f.db.SetSubscriptionStart(f.ctx, "acme", "g", t0.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var mode string
	var start time.Time
	f.scan(`SELECT mode, starts_after FROM queen.subscriptions WHERE queue_id = $1`, []any{orders}, &mode, &start)
	require.Equal(t, "new", mode, "the mode it had, now written down")
	require.True(t, start.Equal(t0.Add(time.Hour)))
}

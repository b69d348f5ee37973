package hotlist_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/domain/hotlist"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestAnnounceMarksThisReplicaAtOnceAndNotifiesEachPartitionOnce(t *testing.T) {
	pool := pgtest.New(t)
	conn := pgtest.Listen(t, pool.Config().ConnString(), hotlist.Channel)
	l := hotlist.New()
	a := hotlist.NewAnnouncer(l, db.New(pool), slog.New(slog.NewTextHandler(io.Discard, nil)))
	q, p1, p2 := uuid.New(), uuid.New(), uuid.New()
	l.Seed(q, "g", nil)
	woken := l.Wait(q, "g", uuid.Nil)

	a.Announce(q, p1)
	a.Announce(q, p2)
	a.Announce(q, p1)
	select {
	case <-woken.C():
	default:
		t.Fatal("Announce did not mark this replica's list before returning")
	}
	cs, _ := l.Candidates(q, "g", 10, time.Now(), uuid.Nil)
	require.ElementsMatch(t, []uuid.UUID{p1, p2}, hotlist.IDs(cs))

	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	require.Equal(t, map[string]int{q.String() + ":" + p1.String(): 1, q.String() + ":" + p2.String(): 1},
		pgtest.Heard(t, conn, 2, 20*hotlist.Linger), "the announcements of one linger, each partition once")

	a.Announce(q, p2)
	require.Equal(t, map[string]int{q.String() + ":" + p2.String(): 1}, pgtest.Heard(t, conn, 1, 20*hotlist.Linger))
	stop()
	<-done
}

func TestAnnouncementsPendingWhenRunEndsAreSent(t *testing.T) {
	pool := pgtest.New(t)
	conn := pgtest.Listen(t, pool.Config().ConnString(), hotlist.Channel)
	a := hotlist.NewAnnouncer(hotlist.New(), db.New(pool), slog.New(slog.NewTextHandler(io.Discard, nil)))
	q, p := uuid.New(), uuid.New()
	ctx, stop := context.WithCancel(t.Context())
	stop()
	a.Announce(q, p)
	a.Run(ctx) // already cancelled: it only sends what is pending
	require.Equal(t, map[string]int{q.String() + ":" + p.String(): 1}, pgtest.Heard(t, conn, 1, 20*hotlist.Linger))
}

// A replica marks its own announcements when it makes them; their echo
// through its LISTEN is not a second mark, which would wake a second pop
// for a partition the first has leased by then. Another replica's
// notification, which comes after the echo on the same connection, still
// wakes a pop: for its partition, not for the echoed one.
func TestTheEchoOfThisReplicasAnnouncementWakesNoSecondPop(t *testing.T) {
	pool := pgtest.New(t)
	heard := pgtest.Listen(t, pool.Config().ConnString(), hotlist.Channel)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	l := hotlist.New()
	a := hotlist.NewAnnouncer(l, db.New(pool), log)
	ctx, stop := context.WithCancel(t.Context())
	listening := make(chan struct{})
	done := make(chan struct{}, 2)
	go func() { a.Run(ctx); done <- struct{}{} }()
	go func() {
		hotlist.Listen(ctx, db.New(pool), l, log, func(context.Context) { close(listening) }, func(uuid.UUID) {})
		done <- struct{}{}
	}()
	defer func() { stop(); <-done; <-done }()
	<-listening

	q, p, other := uuid.New(), uuid.New(), uuid.New()
	l.Seed(q, "g", nil)
	first, second := l.Wait(q, "g", uuid.Nil), l.Wait(q, "g", uuid.Nil)
	a.Announce(q, p)
	<-first.C()
	cs, _ := l.Candidates(q, "g", 5, time.Now(), first.Take())
	require.Equal(t, []uuid.UUID{p}, hotlist.IDs(cs), "the first pop takes it")
	pgtest.Heard(t, heard, 1, 0) // the announcement has committed
	require.NoError(t, db.New(pool).Notify(t.Context(), hotlist.Channel, []string{q.String() + ":" + other.String()}), "another replica's notification")
	<-second.C()
	require.Equal(t, other, second.Take(), "woken by the other replica's notification, not by the echo before it")
}

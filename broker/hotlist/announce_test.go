package hotlist_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/db"
	"github.com/regent-mq/regent/broker/hotlist"
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

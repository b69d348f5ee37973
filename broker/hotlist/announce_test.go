package hotlist

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// listen opens a connection that LISTENs on Channel, as another replica's
// listener does.
func listen(t *testing.T, url string) *pgx.Conn { // on the pool's database: NOTIFY is per database
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	_, err = conn.Exec(t.Context(), "LISTEN "+Channel)
	require.NoError(t, err)
	return conn
}

// heard collects the payloads conn receives until none arrives for quiet.
func heard(t *testing.T, conn *pgx.Conn, quiet time.Duration) map[string]int {
	t.Helper()
	got := map[string]int{}
	for {
		ctx, cancel := context.WithTimeout(t.Context(), quiet)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return got
		}
		require.NoError(t, err)
		got[n.Payload]++
	}
}

func TestAnnounceMarksThisReplicaAtOnceAndNotifiesEachPartitionOnce(t *testing.T) {
	pool := pgtest.New(t)
	conn := listen(t, pool.Config().ConnString())
	l := New()
	a := NewAnnouncer(l, pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
	q, p1, p2 := uuid.New(), uuid.New(), uuid.New()
	l.Seed(q, "g", nil)
	woken := l.Wait(q)

	a.Announce(q, p1)
	a.Announce(q, p2)
	a.Announce(q, p1)
	select {
	case <-woken:
	default:
		t.Fatal("Announce did not mark this replica's list before returning")
	}
	cs, _ := l.Candidates(q, "g", 10, time.Now())
	require.ElementsMatch(t, []uuid.UUID{p1, p2}, ids(cs))

	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	require.Equal(t, map[string]int{q.String() + ":" + p1.String(): 1, q.String() + ":" + p2.String(): 1},
		heard(t, conn, 20*Linger), "the announcements of one linger, each partition once")

	a.Announce(q, p2)
	require.Equal(t, map[string]int{q.String() + ":" + p2.String(): 1}, heard(t, conn, 20*Linger))
	stop()
	<-done
}

func TestAnnouncementsPendingWhenRunEndsAreSent(t *testing.T) {
	pool := pgtest.New(t)
	conn := listen(t, pool.Config().ConnString())
	a := NewAnnouncer(New(), pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
	q, p := uuid.New(), uuid.New()
	ctx, stop := context.WithCancel(t.Context())
	stop()
	a.Announce(q, p)
	a.Run(ctx) // already cancelled: it only sends what is pending
	require.Equal(t, map[string]int{q.String() + ":" + p.String(): 1}, heard(t, conn, 20*Linger))
}

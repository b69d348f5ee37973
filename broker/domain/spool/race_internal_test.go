package spool

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/commit"
	"github.com/regent-mq/regent/broker/domain/hotlist"
	"github.com/regent-mq/regent/broker/domain/produce"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/pgtest"
	"github.com/regent-mq/regent/test/poll"
)

// toggle is push maintenance switched by the test.
type toggle struct{ on atomic.Bool }

func (t *toggle) Maintenance() bool { return t.on.Load() }
func (t *toggle) Known() bool       { return true }

// Appends that race drains, while the mode flips on and off faster than a
// drain finishes, all reach the database: a drain never takes the file that
// appends go to.
func TestAppendsRacingDrainsAllReachTheDatabase(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := metrics.New()
	sw := &toggle{}
	sw.on.Store(true)
	d := db.New(pool)
	hot := hotlist.New()
	p := produce.New(d, catalog.New(d, config.DefaultCatalogSize), produce.Options{Metrics: m, Logger: logger})
	s, err := Open(t.TempDir(), p, commit.New(hotlist.NewAnnouncer(hot, d, logger), hot, m), sw, m.SpoolBuffered, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	var appended atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rec := Record{Tenant: "default", Item: produce.Item{Queue: "raced", Partition: "Default",
					TransactionID: fmt.Sprintf("w%d-%d", w, i), Payload: []byte(`1`)}}
				if err := s.Append([]Record{rec}); err != nil {
					t.Error(err)
					return
				}
				appended.Add(1)
			}
		})
	}
	// Real time: the mode flips at its own pace, unrelated to the drains'
	// and appends', so that it lands anywhere in a drain, for 3 s.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(37 * time.Millisecond) {
		sw.on.Store(!sw.on.Load())
	}
	close(stop)
	wg.Wait()
	sw.on.Store(false)
	poll.Eventually(t, 20*time.Second, func() error {
		if n := s.pending.total(); n > 0 {
			return fmt.Errorf("%d records still pending", n)
		}
		return nil
	})
	q, err := dbtest.New(pool).Queue(t.Context(), "default", "raced")
	if err != nil {
		t.Fatal(err)
	}
	if stored := int64(q.Frames); stored != appended.Load() || stored == 0 {
		t.Fatalf("%d records appended, %d stored", appended.Load(), stored)
	}
	t.Logf("%d records appended and stored while the mode flipped every 37 ms", q.Frames)
}

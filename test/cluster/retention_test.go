package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/cluster"
	"github.com/regent-mq/regent/test/pgtest"
)

// Every replica runs the retention sweep; one sweeps at a time. A backlog
// that turns old all at once (retention switched on after the pushes) is
// found by all three replicas within one 100ms interval, so if they did not
// take turns, their deletes would run side by side. The test watches the
// database's active statements throughout.
func TestRetentionRunsOnOneReplicaAtATime(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	bs := cluster.Start(t, db, 3, "--retention-interval=100ms", noReseed)
	b := brokertest.At(bs[0].URL)
	const requests, partitions = 100, 100
	for i := range requests {
		items := make([]map[string]any, partitions)
		for p := range items {
			items[p] = map[string]any{"queue": "aged", "partition": fmt.Sprint(p), "payload": i}
		}
		if r := b.Do(t, "POST", "/api/v1/push", "", map[string]any{"items": items}); r.Status != http.StatusCreated {
			t.Fatalf("push = %d %s", r.Status, r.Body)
		}
	}
	t.Logf("pushed %d messages on %d partitions", requests*partitions, partitions)
	pool, err := pgxpool.New(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d := dbtest.New(pool)
	// Every message older than the retention below.
	if err := d.Age(t.Context(), "default", "aged", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	// The watch starts before retention is switched on, so that a sweep
	// quicker than the test's first look is still seen, and goes on after
	// the messages are hidden (raising the floors comes first, the deletes
	// of their segments after).
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	type watched struct {
		seen, most int
		err        error
	}
	stop := make(chan struct{})
	done := make(chan watched, 1)
	go func() {
		var w watched
		for {
			select {
			case <-stop:
				done <- w
				return
			default:
			}
			// Nothing but retention deletes anything in this database
			// meanwhile; raising the floors, which hides the messages
			// before their segments are deleted, and dropping the
			// segments are retention's too.
			deleting, err := d.Running(ctx, "delete", "raise_floors", "drop_below_floors")
			if err != nil {
				w.err = err
				done <- w
				return
			}
			if deleting > 0 {
				w.seen++
			}
			w.most = max(w.most, deleting)
		}
	}()
	if r := b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": "aged", "options": map[string]any{"retentionEnabled": true, "retentionSeconds": 1}}); r.Status != http.StatusOK {
		t.Fatalf("configure = %d %s", r.Status, r.Body)
	}
	brokertest.Eventually(t, 60*time.Second, func() error {
		r := b.Do(t, "GET", "/api/v1/pop/queue/aged?batch=1&partitions=100&autoAck=true", "", nil)
		if r.Status == http.StatusOK {
			return errors.New("retention has not hidden every aged message")
		}
		if r.Status != http.StatusNoContent {
			t.Fatalf("pop = %d %s", r.Status, r.Body)
		}
		return nil
	})
	// The deletes behind the floors.
	brokertest.Eventually(t, 60*time.Second, func() error {
		q, err := d.Queue(ctx, "default", "aged")
		if err != nil {
			return err
		}
		if q.Segments > 0 {
			return fmt.Errorf("%d segments left behind the floors", q.Segments)
		}
		return nil
	})
	close(stop)
	w := <-done
	if w.err != nil {
		t.Fatal(w.err)
	}
	seen, most := w.seen, w.most
	t.Logf("retention deletes seen in %d samples, at most %d at once", seen, most)
	if seen == 0 {
		t.Fatal("no retention delete was ever seen running; the test proves nothing")
	}
	if most > 1 {
		t.Fatalf("%d retention deletes ran at once", most)
	}
}

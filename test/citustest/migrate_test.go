package citustest_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/pg/migrate"
	"github.com/regent-mq/regent/test/citustest"
)

// A broker migrates a new Citus database over its own pool, and then
// serves on it: the session that placed the tables must delete a queue as
// one started after. Citus refuses a catalog write after a parallel
// statement over the shards, unless the session's multi-shard mode is
// sequential, a database setting migrate makes, which a session takes
// only when it starts: migrate starts the pool's sessions again.
func TestAQueueIsDeletedOverThePoolThatFirstPlacedTheTables(t *testing.T) {
	c := citustest.New(t, 2)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, c.URL().String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := migrate.Up(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	d := db.New(pool)
	// A partition on each shard, most likely: the delete is then over
	// every worker.
	for i := range 16 {
		got, err := d.ResolvePartitions(ctx, []catalog.Target{{Tenant: "default", Queue: "q", Partition: uuid.NewString()}})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		txid := uuid.NewString()
		if _, _, err := d.Push(ctx, db.Segments{Partitions: [][16]byte{got[0].ID}, Frames: []int32{1}, Bodies: [][]byte{{1}}, Checksums: []int64{0},
			TxIDs: []string{txid}, MinAt: []time.Time{now}, MaxAt: []time.Time{now},
			Dedups: []int32{1}, DedupTxIDs: []string{txid}, DedupMsgIDs: [][16]byte{uuid.New()}}); err != nil {
			t.Fatal(i, err)
		}
	}
	if _, err := d.DeleteQueue(ctx, "default", "q"); err != nil {
		t.Fatal(err)
	}
}

package celldb_test

import (
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/pipeline"
)

// A partition counts while the group has messages there left to pop:
// neither a consumed partition, nor another group's cursor, nor offsets
// retention removed.
func TestPartitionsBehindCountsThePartitionsWithMessagesTheGroupHasNotConsumed(t *testing.T) {
	b, cell, _ := setup(t)
	execSQL(t, b, `INSERT INTO queen.queues (id, tenant, name) VALUES ('0193f0c4-0000-7000-8000-000000000001', 'default', 'src')`)
	execSQL(t, b, `INSERT INTO queen.partitions (id, queue_id, name, next_offset, floor_offset, last_push_at) VALUES
		('0193f0c4-0000-7000-8000-000000000002', '0193f0c4-0000-7000-8000-000000000001', 'behind', 10, 0, now() - interval '1 hour'),
		('0193f0c4-0000-7000-8000-000000000003', '0193f0c4-0000-7000-8000-000000000001', 'consumed', 5, 0, now() - interval '2 hours'),
		('0193f0c4-0000-7000-8000-000000000004', '0193f0c4-0000-7000-8000-000000000001', 'no-cursor', 3, 0, NULL),
		('0193f0c4-0000-7000-8000-000000000005', '0193f0c4-0000-7000-8000-000000000001', 'expired', 7, 7, now() - interval '3 hours')`)
	execSQL(t, b, `INSERT INTO queen.cursors (partition_id, consumer_group, committed) VALUES
		('0193f0c4-0000-7000-8000-000000000002', 'streams.q', 4),
		('0193f0c4-0000-7000-8000-000000000003', 'streams.q', 5),
		('0193f0c4-0000-7000-8000-000000000004', 'other-group', 3)`)
	l, err := cell.SourceLoad(ctx, auth.DefaultTenant, "q", "src", "streams.q", windows)
	if err != nil {
		t.Fatal(err)
	}
	if l.PartitionsBehind != 2 {
		t.Errorf("partitions behind = %d, want 2 (behind, no-cursor)", l.PartitionsBehind)
	}
	if l.LastPush == nil || time.Since(*l.LastPush) < 59*time.Minute || time.Since(*l.LastPush) > 61*time.Minute {
		t.Errorf("last push = %v, want an hour ago (the newest partition's)", l.LastPush)
	}
	if other, err := cell.SourceLoad(ctx, "acme", "q", "src", "streams.q", windows); err != nil || other.PartitionsBehind != 0 || other.LastPush != nil {
		t.Errorf("another tenant's queue of the same name has load %+v (%v), want none", other, err)
	}
}

func TestASourceThatDoesNotExistYetHasNoLoad(t *testing.T) {
	_, cell, _ := setup(t)
	l, err := cell.SourceLoad(ctx, auth.DefaultTenant, "q", "absent", "streams.q", windows)
	if err != nil || l.PartitionsBehind != 0 || l.LastPush != nil {
		t.Fatalf("load %+v (%v), want none", l, err)
	}
}

// Open windows are the query's state rows under the pipeline's prefix, but
// each partition's clock row, and only the tenant's query of that name.
func TestOpenWindowsAreThePipelinesStateRowsButTheClock(t *testing.T) {
	b, cell, mine := setup(t)
	execSQL(t, b, `INSERT INTO queen_streams.queries (id, tenant, name, source_queue, config_hash) VALUES
		('0193f0c4-0000-7000-8000-0000000000a2', 'acme', 'q', 'src', 'h')`)
	state := func(query, partition, key string) {
		execSQL(t, b, `INSERT INTO queen_streams.state (query_id, partition_id, key, value) VALUES ($1, $2, $3, '{}')`, query, partition, key)
	}
	theirs := "0193f0c4-0000-7000-8000-0000000000a2"
	p1, p2 := "0193f0c4-0000-7000-8000-0000000000b1", "0193f0c4-0000-7000-8000-0000000000b2"
	state(mine, p1, pipeline.ClockKey)
	state(mine, p2, pipeline.ClockKey)
	state(mine, p1, pipeline.Prefix+"2026-08-17T10:00:00Z\u001fk1")
	state(mine, p2, pipeline.Prefix+"2026-08-17T10:01:00Z\u001fk2")
	state(mine, p2, "user-key") // not the pipeline's
	state(theirs, p1, pipeline.Prefix+"2026-08-17T10:00:00Z\u001fk1")
	l, err := cell.SourceLoad(ctx, auth.DefaultTenant, "q", "src", "streams.q", windows)
	if err != nil || l.OpenWindows != 2 {
		t.Fatalf("open windows = %d (%v), want 2", l.OpenWindows, err)
	}
}

var windows = celldb.WindowKeys{Prefix: pipeline.Prefix, Clock: pipeline.ClockKey}

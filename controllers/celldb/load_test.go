package celldb_test

import (
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/auth"
)

// A partition counts while the group has messages there left to pop:
// neither a consumed partition, nor another group's cursor, nor offsets
// retention removed.
func TestPartitionsBehindCountsThePartitionsWithMessagesTheGroupHasNotConsumed(t *testing.T) {
	b, db, _ := setup(t)
	exec(t, b, `INSERT INTO queen.queues (id, tenant, name) VALUES ('0193f0c4-0000-7000-8000-000000000001', 'default', 'src')`)
	exec(t, b, `INSERT INTO queen.partitions (id, queue_id, name, next_offset, floor_offset, last_push_at) VALUES
		('0193f0c4-0000-7000-8000-000000000002', '0193f0c4-0000-7000-8000-000000000001', 'behind', 10, 0, now() - interval '1 hour'),
		('0193f0c4-0000-7000-8000-000000000003', '0193f0c4-0000-7000-8000-000000000001', 'consumed', 5, 0, now() - interval '2 hours'),
		('0193f0c4-0000-7000-8000-000000000004', '0193f0c4-0000-7000-8000-000000000001', 'no-cursor', 3, 0, NULL),
		('0193f0c4-0000-7000-8000-000000000005', '0193f0c4-0000-7000-8000-000000000001', 'expired', 7, 7, now() - interval '3 hours')`)
	exec(t, b, `INSERT INTO queen.cursors (partition_id, consumer_group, committed) VALUES
		('0193f0c4-0000-7000-8000-000000000002', 'streams.q', 4),
		('0193f0c4-0000-7000-8000-000000000003', 'streams.q', 5),
		('0193f0c4-0000-7000-8000-000000000004', 'other-group', 3)`)
	l, err := db.SourceLoad(ctx, auth.DefaultTenant, "src", "streams.q")
	if err != nil {
		t.Fatal(err)
	}
	if l.PartitionsBehind != 2 {
		t.Errorf("partitions behind = %d, want 2 (behind, no-cursor)", l.PartitionsBehind)
	}
	if l.LastPush == nil || time.Since(*l.LastPush) < 59*time.Minute || time.Since(*l.LastPush) > 61*time.Minute {
		t.Errorf("last push = %v, want an hour ago (the newest partition's)", l.LastPush)
	}
	if other, err := db.SourceLoad(ctx, "acme", "src", "streams.q"); err != nil || other.PartitionsBehind != 0 || other.LastPush != nil {
		t.Errorf("another tenant's queue of the same name has load %+v (%v), want none", other, err)
	}
}

func TestASourceThatDoesNotExistYetHasNoLoad(t *testing.T) {
	_, db, _ := setup(t)
	l, err := db.SourceLoad(ctx, auth.DefaultTenant, "absent", "streams.q")
	if err != nil || l.PartitionsBehind != 0 || l.LastPush != nil {
		t.Fatalf("load %+v (%v), want none", l, err)
	}
}

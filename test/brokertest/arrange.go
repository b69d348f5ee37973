package brokertest

import (
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/pg/db/dbtest"
)

// Cursors lists the cursors of b's tenant's queue (see dbtest.DB.Cursors).
func (b *Broker) Cursors(t testing.TB, queue string) []dbtest.Cursor {
	t.Helper()
	c, err := b.DB.Cursors(t.Context(), b.Tenant, queue)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	return c
}

// Cursor is the one cursor of b's tenant's queue, failing the test when
// there is not exactly one.
func (b *Broker) Cursor(t testing.TB, queue string) dbtest.Cursor {
	t.Helper()
	c := b.Cursors(t, queue)
	if len(c) != 1 {
		t.Fatalf("brokertest: queue %s has %d cursors, want 1: %+v", queue, len(c), c)
	}
	return c[0]
}

// Stored is what b's tenant's queue holds (see dbtest.DB.Queue).
func (b *Broker) Stored(t testing.TB, queue string) dbtest.Queue {
	t.Helper()
	q, err := b.DB.Queue(t.Context(), b.Tenant, queue)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	return q
}

// ExpireLeases ends every lease on b's tenant's queue, as its lease time
// passing would.
func (b *Broker) ExpireLeases(t testing.TB, queue string) {
	t.Helper()
	if err := b.DB.ExpireLeases(t.Context(), b.Tenant, queue); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
}

// Age moves b's tenant's queue back in time by d, as d passing would (see
// dbtest.DB.Age): in place of sleeping d.
func (b *Broker) Age(t testing.TB, queue string, d time.Duration) {
	t.Helper()
	if err := b.DB.Age(t.Context(), b.Tenant, queue, d); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
}

// Leftovers counts the rows, table by table, that still refer to a queue
// or its partition (see dbtest.DB.Leftovers).
func (b *Broker) Leftovers(t testing.TB, queueID, partitionID string) map[string]int {
	t.Helper()
	left, err := b.DB.Leftovers(t.Context(), queueID, partitionID)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	return left
}

// Quiet makes a partition's last push of b's tenant's queue lie ago
// before now, as its window buffer reads it.
func (b *Broker) Quiet(t testing.TB, queue, partition string, ago time.Duration) {
	t.Helper()
	if err := b.DB.Quiet(t.Context(), b.Tenant, queue, partition, ago); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
}

// AddPartitions adds n empty partitions to b's tenant's queue (see
// dbtest.DB.AddPartitions).
func (b *Broker) AddPartitions(t testing.TB, queue string, n int) {
	t.Helper()
	if err := b.DB.AddPartitions(t.Context(), b.Tenant, queue, n); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
}

// DropSegment deletes the segment at offset base of b's tenant's queue, as
// retention would.
func (b *Broker) DropSegment(t testing.TB, queue string, base int64) {
	t.Helper()
	if err := b.DB.DropSegment(t.Context(), b.Tenant, queue, base); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
}

// SegmentSizes lists the stored size of each segment of b's tenant's
// queue, by partition and offset.
func (b *Broker) SegmentSizes(t testing.TB, queue string) []int64 {
	t.Helper()
	sizes, err := b.DB.SegmentSizes(t.Context(), b.Tenant, queue)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	return sizes
}

// RaiseFloor moves the floor of every partition of b's tenant's queue to
// offset, as retention would.
func (b *Broker) RaiseFloor(t testing.TB, queue string, offset int64) {
	t.Helper()
	if err := b.DB.RaiseFloor(t.Context(), b.Tenant, queue, offset); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
}

// Grant gives tenant an enabled streams quota grant with the cap max on
// queries (nil: none). The default tenant needs none.
func (b *Broker) Grant(t testing.TB, tenant string, max *int) {
	t.Helper()
	if err := b.DB.Grant(t.Context(), tenant, max); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
}

// StreamQuery reads the streams query of that id (see dbtest.DB.StreamQuery).
func (b *Broker) StreamQuery(t testing.TB, id string) dbtest.StreamQuery {
	t.Helper()
	q, err := b.DB.StreamQuery(t.Context(), id)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	return q
}

// StreamQueries counts b's tenant's streams queries called name.
func (b *Broker) StreamQueries(t testing.TB, name string) int {
	t.Helper()
	n, err := b.DB.StreamQueries(t.Context(), b.Tenant, name)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	return n
}

// PutState writes a state row of a query's partition, as a committed
// cycle leaves it.
func (b *Broker) PutState(t testing.TB, queryID, partitionID, key, value string) {
	t.Helper()
	if err := b.DB.PutState(t.Context(), queryID, partitionID, key, value); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
}

// State reads the state of a query's partition (every partition, for "").
func (b *Broker) State(t testing.TB, queryID, partitionID string) map[string]string {
	t.Helper()
	s, err := b.DB.State(t.Context(), queryID, partitionID)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	return s
}

// StateRows counts a query's state rows.
func (b *Broker) StateRows(t testing.TB, queryID string) int {
	t.Helper()
	n, err := b.DB.StateRows(t.Context(), queryID)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	return n
}

// PlaceCursor puts group's cursor on a partition of b's tenant's queue at
// committed (see dbtest.DB.PlaceCursor).
func (b *Broker) PlaceCursor(t testing.TB, queue, partition, group string, committed int64) {
	t.Helper()
	if err := b.DB.PlaceCursor(t.Context(), b.Tenant, queue, partition, group, committed); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
}

// DropLeases clears every lease on b's tenant's queue, as if none had been
// taken (see dbtest.DB.DropLeases).
func (b *Broker) DropLeases(t testing.TB, queue string) {
	t.Helper()
	if err := b.DB.DropLeases(t.Context(), b.Tenant, queue); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
}

// ForgetCursors deletes every cursor of b's tenant's queue.
func (b *Broker) ForgetCursors(t testing.TB, queue string) {
	t.Helper()
	if err := b.DB.ForgetCursors(t.Context(), b.Tenant, queue); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
}

// CreateTable creates table in b's tenant's schema (see
// dbtest.DB.CreateTable).
func (b *Broker) CreateTable(t testing.TB, table string, cols []dbtest.TableColumn, unique ...string) {
	t.Helper()
	if err := b.DB.CreateTable(t.Context(), b.Tenant, table, cols, unique); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
}

// TableRows reads the rows of b's tenant's table (see dbtest.DB.TableRows).
func (b *Broker) TableRows(t testing.TB, table string) []string {
	t.Helper()
	rows, err := b.DB.TableRows(t.Context(), b.Tenant, table)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	return rows
}

// Shard is the Citus shard of a partition of b's tenant's queue, 0 on
// PostgreSQL (see dbtest.DB.Shard).
func (b *Broker) Shard(t testing.TB, queue, partition string) int64 {
	t.Helper()
	s, err := b.DB.Shard(t.Context(), b.Tenant, queue, partition)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	return s
}

package db_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/test/pgtest"
)

// The seam's tests run its statements against real PostgreSQL, each test on
// a database of its own: pgtest clones it from a template that the binary
// migrated once, which costs a CREATE DATABASE (tens of milliseconds), so
// the tests are independent and run in parallel. A transaction per test
// would be cheaper still, but it would change what is tested: now() would
// stand still for the whole test (lease_live, lag ages), and the statements
// would no longer commit, take their locks, or spread a batch over the pool
// as they do in the broker.
func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

var ctx = context.Background()

// fixture is a fresh migrated database, the seam on it, and the rows a test
// lays down in it. The rows are written as the broker leaves them, straight
// into the tables, so that a test of a read depends on no other family.
type fixture struct {
	t    *testing.T
	db   *db.DB
	pool *pgxpool.Pool
	ctx  context.Context
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	t.Parallel()
	pool := pgtest.New(t)
	return &fixture{t: t, db: db.New(pool), pool: pool, ctx: t.Context()}
}

// exec runs a statement that lays down or inspects rows.
func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.pool.Exec(f.ctx, sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

// scan reads one row of a statement that inspects rows.
func (f *fixture) scan(sql string, args []any, dest ...any) {
	f.t.Helper()
	if err := f.pool.QueryRow(f.ctx, sql, args...).Scan(dest...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

// queue creates the tenant's queue.
func (f *fixture) queue(tenant, name string) uuid.UUID {
	f.t.Helper()
	id := uuid.New()
	f.exec(`INSERT INTO queen.queues (id, tenant, name) VALUES ($1, $2, $3)`, id, tenant, name)
	return id
}

// partition creates a partition of the queue, without messages.
func (f *fixture) partition(queue uuid.UUID, name string) uuid.UUID {
	f.t.Helper()
	id := uuid.New()
	f.exec(`INSERT INTO queen.partitions (id, queue_id, name) VALUES ($1, $2, $3)`, id, queue, name)
	return id
}

// push appends a segment of one frame per transaction id to the partition,
// created at created, as a push request does: at the partition's end, which
// moves past it. It returns the segment's base offset.
func (f *fixture) push(partition uuid.UUID, created time.Time, txids ...string) int64 {
	f.t.Helper()
	var base int64
	f.scan(`UPDATE queen.partitions SET next_offset = next_offset + $2 WHERE id = $1 RETURNING next_offset - $2`,
		[]any{partition, len(txids)}, &base)
	f.exec(`INSERT INTO queen.log_segments (partition_id, base_offset, frame_count, body, checksum, txids,
			min_created_at, max_created_at)
		VALUES ($1, $2, $3, '\x00', 7, $4, $5, $5)`, partition, base, len(txids), txids, created)
	return base
}

// segments pushes the partition's messages from t0 on, a segment a minute:
// each argument is a segment, the transaction ids of its frames separated
// by spaces.
func (f *fixture) segments(partition uuid.UUID, segments ...string) {
	f.t.Helper()
	for i, txids := range segments {
		f.push(partition, t0.Add(time.Duration(i)*time.Minute), strings.Fields(txids)...)
	}
}

// cursor places the group's cursor on the partition at committed.
func (f *fixture) cursor(partition uuid.UUID, group string, committed int64) {
	f.t.Helper()
	f.exec(`INSERT INTO queen.cursors (partition_id, consumer_group, committed) VALUES ($1, $2, $3)`,
		partition, group, committed)
}

// lease gives the group's cursor a batch [committed, end), leased until
// expires, as a pop leaves it after retries failed attempts.
func (f *fixture) lease(partition uuid.UUID, group string, end int64, expires time.Time, retries int) {
	f.t.Helper()
	f.exec(`UPDATE queen.cursors SET batch_start = committed, batch_end = $3, lease_id = $4, lease_expires_at = $5,
			retry_count = $6
		WHERE partition_id = $1 AND consumer_group = $2`, partition, group, end, uuid.New(), expires, retries)
}

// cursorRow is a cursor as the table holds it.
type cursorRow struct {
	Committed            int64
	BatchStart, BatchEnd *int64
	Leased               bool
	RetryCount           int
}

func (f *fixture) cursorRow(partition uuid.UUID, group string) cursorRow {
	f.t.Helper()
	var c cursorRow
	f.scan(`SELECT committed, batch_start, batch_end, lease_id IS NOT NULL OR lease_expires_at IS NOT NULL, retry_count
		  FROM queen.cursors WHERE partition_id = $1 AND consumer_group = $2`, []any{partition, group},
		&c.Committed, &c.BatchStart, &c.BatchEnd, &c.Leased, &c.RetryCount)
	return c
}

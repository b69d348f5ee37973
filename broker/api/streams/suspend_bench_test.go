package streams_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
)

// BenchmarkPopOfAQuerysGroup measures queen.pop claiming one message of a
// partition as a registered query's consumer group (streams.q, whose pop
// looks up whether the query is suspended) and as the queue mode group
// (which does not), each call in a transaction rolled back, so that what
// is measured is the function and not the commit's WAL flush.
//
//	go test ./broker/api/streams -run '^$' -bench PopOfAQuerysGroup
func BenchmarkPopOfAQuerysGroup(b *testing.B) {
	f := newFixture(b)
	f.b.PushN(b, f.src, "", 0, 10)
	queue := f.b.Stored(b, f.src).ID
	for name, group := range map[string]string{"streams.q": f.group, "__QUEUE_MODE__": "__QUEUE_MODE__"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				err := pgx.BeginFunc(b.Context(), f.b.Pool, func(tx pgx.Tx) error {
					var n int
					err := tx.QueryRow(b.Context(), `SELECT count(*) FILTER (WHERE outcome = 'claimed')
						FROM queen.pop(p_tenant => $1, p_queue_id => $2, p_candidates => ARRAY[$3::uuid], p_group => $4,
							p_partitions => 1, p_batch => 1, p_lease_id => NULL, p_sub_start => 'all', p_max_bytes => 1048576)`,
						f.b.Tenant, queue, f.partition, group).Scan(&n)
					if err == nil && n != 1 {
						b.Fatalf("pop claimed %d partitions, want 1", n)
					}
					return errRollback
				})
				if err != errRollback {
					b.Fatal(err)
				}
			}
		})
	}
}

var errRollback = errors.New("rolled back on purpose")

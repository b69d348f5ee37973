package streams_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/pg/db"
)

// BenchmarkPopOfAQuerysGroup measures queen.pop_v2, through the broker's own
// call of it (db.Pop), claiming one message of a partition as a registered
// query's consumer group (streams.q, whose pop looks up whether the query
// is suspended) and as the queue mode group (which does not), each call in
// a transaction rolled back, so that what is measured is the function and
// not the commit's WAL flush.
//
//	go test ./broker/api/streams -run '^$' -bench PopOfAQuerysGroup
func BenchmarkPopOfAQuerysGroup(b *testing.B) {
	f := newFixture(b)
	f.b.PushN(b, f.src, "", 0, 10)
	queue := uuid.MustParse(f.b.Stored(b, f.src).ID)
	candidates := []uuid.UUID{uuid.MustParse(f.partition)}
	d := db.New(f.b.Pool)
	for name, group := range map[string]string{"streams.q": f.group, "__QUEUE_MODE__": "__QUEUE_MODE__"} {
		b.Run(name, func(b *testing.B) {
			call := &db.PopCall{Tenant: f.b.Tenant, Queue: f.src, QueueID: queue, Group: group,
				Partitions: 1, Batch: 1, SubStart: "all", MaxBytes: 1 << 20}
			for b.Loop() {
				err := d.InTx(b.Context(), func(tx *db.DB) error {
					claims, _, _, err := tx.Pop(b.Context(), call, candidates)
					if err != nil {
						return err
					}
					if len(claims) != 1 {
						return fmt.Errorf("pop claimed %d partitions, want 1", len(claims))
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

package db

import (
	"context"
	"math"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/test/pgtest"
)

// TestHashUUIDIsPostgreSQLsUUIDHash: the shard map places a partition by
// the hash that Citus places it by, PostgreSQL's own uuid_hash, for the
// extremes and for random ids.
func TestHashUUIDIsPostgreSQLsUUIDHash(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	ids := []uuid.UUID{uuid.Nil, uuid.Max}
	for range 1000 {
		ids = append(ids, uuid.New())
	}
	rows, err := conn.Query(ctx, `SELECT uuid_hash(u) FROM unnest($1::uuid[]) WITH ORDINALITY AS t (u, i) ORDER BY i`, ids)
	if err != nil {
		t.Fatal(err)
	}
	want, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if got := hashUUID(id); got != want[i] {
			t.Fatalf("hashUUID(%s) = %d; uuid_hash gives %d", id, got, want[i])
		}
	}
}

// TestTheShardMapFindsTheShardWhoseRangeHoldsTheHash: a hash goes to the
// shard with the greatest least hash not above it, the first shard's
// least being the least int32.
func TestTheShardMapFindsTheShardWhoseRangeHoldsTheHash(t *testing.T) {
	a, b, c := new(pgxpool.Pool), new(pgxpool.Pool), new(pgxpool.Pool)
	m := &shardMap{mins: []int32{math.MinInt32, -5, 100}, pools: []*pgxpool.Pool{a, b, c}}
	for _, tc := range []struct {
		hash int32
		want *pgxpool.Pool
	}{{math.MinInt32, a}, {-6, a}, {-5, b}, {99, b}, {100, c}, {math.MaxInt32, c}} {
		if got := m.at(tc.hash); got != tc.want {
			t.Errorf("the hash %d went to shard %p; want %p", tc.hash, got, tc.want)
		}
	}
}

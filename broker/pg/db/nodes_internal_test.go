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

// TestANodesPoolTakesTheURLsSettingsTowardsTheNode: a node's pool logs in
// as the coordinator's URL says, with each of its TLS modes (prefer: TLS,
// then none), towards the node, whose name the certificate must hold.
func TestANodesPoolTakesTheURLsSettingsTowardsTheNode(t *testing.T) {
	base, err := pgxpool.ParseConfig("postgres://regent:secret@coordinator:5432/regent?sslmode=prefer&application_name=b")
	if err != nil {
		t.Fatal(err)
	}
	n := &nodes{base: base, pools: map[string]*pgxpool.Pool{}}
	defer n.close()
	p, err := n.nodePool("worker-1", 6000)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := n.nodePool("worker-1", 6000); again != p {
		t.Error("a second lookup of the node opened another pool")
	}
	c := p.Config().ConnConfig
	if c.Host != "worker-1" || c.Port != 6000 || c.User != "regent" || c.Password != "secret" || c.Database != "regent" ||
		c.RuntimeParams["application_name"] != "b" {
		t.Errorf("the node's pool connects as %s@%s:%d/%s %v", c.User, c.Host, c.Port, c.Database, c.RuntimeParams)
	}
	if c.TLSConfig == nil || c.TLSConfig.ServerName != "worker-1" {
		t.Errorf("the node's pool tries TLS first, for the node's name: %+v", c.TLSConfig)
	}
	var plain bool
	for _, f := range c.Fallbacks {
		if f.Host != "worker-1" || f.Port != 6000 || f.TLSConfig != nil && f.TLSConfig.ServerName != "worker-1" {
			t.Errorf("a fallback goes to %s:%d (TLS %+v)", f.Host, f.Port, f.TLSConfig)
		}
		plain = plain || f.TLSConfig == nil
	}
	if !plain {
		t.Error("sslmode=prefer lost its fallback without TLS")
	}
	if base.ConnConfig.Host != "coordinator" || base.ConnConfig.TLSConfig.ServerName != "coordinator" {
		t.Error("the coordinator's settings changed")
	}
}

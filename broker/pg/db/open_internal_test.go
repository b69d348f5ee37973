package db

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/regent-mq/regent/test/pgtest"
)

// BenchmarkDropClosed is what the pool's check costs every acquire of a
// live connection.
func BenchmarkDropClosed(b *testing.B) {
	conn, err := pgx.Connect(context.Background(), pgtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	for b.Loop() {
		if ok, _ := dropClosed(context.Background(), conn); !ok {
			b.Fatal("a live connection was taken for closed")
		}
	}
}

func TestALiveConnectionIsKeptAndOneTheServerEndedIsDropped(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if ok, _ := dropClosed(ctx, conn); !ok {
		t.Fatal("a live connection was dropped")
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1, 5000)`, conn.PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	if ok, _ := dropClosed(ctx, conn); ok {
		t.Fatal("a connection whose backend was terminated was kept")
	}
}

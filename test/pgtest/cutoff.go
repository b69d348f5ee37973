package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// CutOff takes the database at dbURL away from whoever uses it, as an
// outage would: the database refuses new connections, and the ones it has
// are terminated. It stays so; the throwaway cluster drops it at the end.
func CutOff(t testing.TB, dbURL string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("pgtest: cut off: %v", err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	u.Path = "/postgres"
	admin, err := pgx.Connect(context.Background(), u.String())
	if err != nil {
		t.Fatalf("pgtest: cut off %s: %v", db, err)
	}
	defer admin.Close(context.Background())
	ctx := context.Background()
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s ALLOW_CONNECTIONS false", pgx.Identifier{db}.Sanitize())); err != nil {
		t.Fatalf("pgtest: cut off %s: %v", db, err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", db); err != nil {
		t.Fatalf("pgtest: cut off %s: %v", db, err)
	}
}

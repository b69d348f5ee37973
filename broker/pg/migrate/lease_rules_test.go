package migrate_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/pgtest"
)

// queen.lease_release_v2: the lease goes; the retry count counts the batch at
// the cursor, so it stays while the cursor stays at that batch and clears
// when the cursor leaves it; a row not to release comes back unchanged.
func TestLeaseReleaseKeepsTheRetryCountUntilTheCursorLeavesTheBatch(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	for _, c := range []struct {
		release, left bool
		lease         bool
		retries       int
	}{
		{release: true, left: false, lease: false, retries: 2},
		{release: true, left: true, lease: false, retries: 0},
		{release: false, left: true, lease: true, retries: 2},
	} {
		var lease pgtype.UUID
		var expires pgtype.Timestamptz
		var retries int
		err := pool.QueryRow(t.Context(), `
			SELECT r.lease_id, r.lease_expires_at, r.retry_count
			  FROM queen.lease_release_v2($1::uuid, now() + interval '1 minute', 2, $2, $3) r`, uuid.New(), c.release, c.left).Scan(&lease, &expires, &retries)
		require.NoError(t, err)
		require.Equal(t, c.lease, lease.Valid, "release %v, batch left %v: the lease", c.release, c.left)
		require.Equal(t, c.lease, expires.Valid, "release %v, batch left %v: the expiry", c.release, c.left)
		require.Equal(t, c.retries, retries, "release %v, batch left %v: the retry count", c.release, c.left)
	}
}

// queen.ack_verdict, the one verdict the three ack paths ask.
func TestAckVerdictIsTheOneRuleOfTheThreeAckPaths(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	held, other := uuid.New(), uuid.New()
	live, gone := time.Now().Add(time.Minute), time.Now().Add(-time.Minute)
	none := pgtype.UUID{}
	id := func(u uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: u, Valid: true} }
	for _, c := range []struct {
		name    string
		offset  *int64
		lease   pgtype.UUID
		expires time.Time
		status  string
		given   pgtype.UUID
		want    string
	}{
		{"no such message", nil, id(held), live, "completed", id(held), "Message not found"},
		{"behind the cursor", ptr(4), none, gone, "completed", id(other), "done"},
		{"another lease given", ptr(5), id(held), live, "retry", id(other), "Invalid or expired lease"},
		{"the lease given expired", ptr(5), id(held), gone, "completed", id(held), "Invalid or expired lease"},
		{"completed with no lease held", ptr(5), none, gone, "completed", none, "Invalid or expired lease"},
		{"failed after a release", ptr(5), none, live, "failed", none, "done"},
		{"the live lease given", ptr(6), id(held), live, "completed", id(held), "apply"},
		{"a held lease, none given", ptr(5), id(held), gone, "completed", none, "apply"},
		{"dlq with no lease", ptr(5), none, gone, "dlq", none, "apply"},
	} {
		var got string
		err := pool.QueryRow(t.Context(), `SELECT queen.ack_verdict($1, 5, $2, $3, $4, $5)`,
			c.offset, c.lease, c.expires, c.status, c.given).Scan(&got)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, got, c.name)
	}
}

func ptr(n int64) *int64 { return &n }

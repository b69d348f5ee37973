package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// Extension is what a lease extension did.
type Extension struct {
	Held      bool      // the tenant holds the lease on some (partition, group)
	ExpiresAt time.Time // zero when every hold had already expired
}

// ExtendLease gives every (partition, group) of tenant holding the live
// lease leaseID expires = max(expires, now + seconds) (queen.lease_extend).
func (d *DB) ExtendLease(ctx context.Context, tenant string, leaseID uuid.UUID, seconds int) (Extension, error) {
	var held int
	var expires pgtype.Timestamptz
	err := d.q.QueryRow(ctx, `SELECT held, expires_at FROM queen.lease_extend(p_tenant => $1, p_lease_id => $2, p_seconds => $3)`,
		tenant, leaseID, seconds).Scan(&held, &expires)
	if err != nil {
		return Extension{}, fmt.Errorf("extend lease %s: %w", leaseID, err)
	}
	return Extension{Held: held > 0, ExpiresAt: expires.Time}, nil
}

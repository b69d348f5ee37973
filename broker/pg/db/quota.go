package db

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// TenantLimits is one limited tenant's limits and stored bytes, as the
// database holds them: a nil limit is none.
type TenantLimits struct {
	Tenant                                       string
	PushMessagesPerSecond, PushMessagesBurst     *int64
	PushBytesPerSecond, PushBytesBurst           *int64
	PopMessagesPerSecond, MaxStoredBytes, Stored *int64
}

// QuotaUsage is what one replica pushed and popped per tenant, and which limits
// refused whom, since it last recorded: parallel slices.
type QuotaUsage struct {
	Tenants                       []string
	Pushed, Popped                []int64
	RefusedTenants, RefusedQuotas []string
}

// QuotaLease asks for Want tokens of a tenant's rate (Kind: push_messages,
// push_bytes or pop_messages); Granted is called with what the cluster's
// bucket gave.
type QuotaLease struct {
	Tenant, Kind string
	Want         int64
	Granted      func(int64)
}

// QuotaLimits reads every limited tenant's limits and stored bytes.
func (d *DB) QuotaLimits(ctx context.Context) ([]TenantLimits, error) {
	rows, err := d.q.Query(ctx, `SELECT tenant, push_messages_per_second, push_messages_burst,
		push_bytes_per_second, push_bytes_burst, pop_messages_per_second, max_stored_bytes, stored_bytes
		FROM queen_streams.quota_limits()`)
	if err != nil {
		return nil, fmt.Errorf("read quota limits: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TenantLimits, error) {
		var x TenantLimits
		return x, r.Scan(&x.Tenant, &x.PushMessagesPerSecond, &x.PushMessagesBurst, &x.PushBytesPerSecond,
			&x.PushBytesBurst, &x.PopMessagesPerSecond, &x.MaxStoredBytes, &x.Stored)
	})
	if err != nil {
		return nil, fmt.Errorf("read quota limits: %w", err)
	}
	return out, nil
}

// RecordQuotaUsage adds a replica's usage to the tenants' rows.
func (d *DB) RecordQuotaUsage(ctx context.Context, u QuotaUsage) error {
	_, err := d.q.Exec(ctx, `SELECT queen_streams.quota_record(p_tenants => $1, p_pushed => $2, p_popped => $3,
		p_refused_tenants => $4, p_refused_quotas => $5)`, u.Tenants, u.Pushed, u.Popped, u.RefusedTenants, u.RefusedQuotas)
	if err != nil {
		return fmt.Errorf("record quota usage: %w", err)
	}
	return nil
}

// LeaseQuota leases every claim's tokens, in one round trip.
func (d *DB) LeaseQuota(ctx context.Context, leases []QuotaLease) error {
	if len(leases) == 0 {
		return nil
	}
	batch := &pgx.Batch{}
	for _, l := range leases {
		batch.Queue(`SELECT queen_streams.quota_lease(p_tenant => $1, p_kind => $2, p_want => $3)`, l.Tenant, l.Kind, l.Want).
			QueryRow(func(row pgx.Row) error {
				var granted int64
				if err := row.Scan(&granted); err != nil {
					return err
				}
				l.Granted(granted)
				return nil
			})
	}
	if err := d.q.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("lease quota tokens: %w", err)
	}
	return nil
}

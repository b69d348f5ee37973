package db

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// Notify sends each payload as a notification of its own on channel, in
// one statement, so that a listener reads exactly what the SQL functions
// that notify send. The transaction writes nothing that a crash could make
// wrong, so its commit does not wait for the WAL flush.
func (d *DB) Notify(ctx context.Context, channel string, payloads []string) error {
	_, err := d.q.Exec(ctx, `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, n) FROM unnest($2::text[]) AS n`,
		channel, payloads)
	if err != nil {
		return fmt.Errorf("notify %d payloads on %s: %w", len(payloads), channel, err)
	}
	return nil
}

// Listen calls heard on every NOTIFY on channel until ctx ends, from a
// connection of its own (ListenOnce), and reconnects retry after a
// failure. Notifications sent while it reconnects are lost: callers that
// must not miss a change also re-read periodically. what names the
// listener in the log.
func (d *DB) Listen(ctx context.Context, channel string, retry time.Duration, log *slog.Logger, what string, heard func(context.Context)) {
	for ctx.Err() == nil {
		err := d.ListenOnce(ctx, channel, func() {}, func(string) { heard(ctx) })
		if ctx.Err() != nil {
			return
		}
		log.Warn(what+": LISTEN connection lost; reconnecting", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
	}
}

// ListenOnce holds a LISTEN on channel on a connection of its own (a pooled
// one would be lost to LISTEN), calls listening once the LISTEN has taken
// effect, then heard with the payload of every notification, until the
// connection fails or ctx ends; it returns why it ended.
func (d *DB) ListenOnce(ctx context.Context, channel string, listening func(), heard func(payload string)) error {
	conn, err := pgx.ConnectConfig(ctx, d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect to LISTEN on %s: %w", channel, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("LISTEN on %s: %w", channel, err)
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for a notification on %s: %w", channel, err)
		}
		heard(n.Payload)
	}
}

package db

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen calls heard on every NOTIFY on channel until ctx ends, from a
// connection of its own (a pooled one would be lost to LISTEN), and
// reconnects retry after a failure. Notifications sent while it reconnects
// are lost: callers that must not miss a change also re-read periodically.
// what names the listener in the log.
func (d *DB) Listen(ctx context.Context, channel string, retry time.Duration, log *slog.Logger, what string, heard func(context.Context)) {
	for ctx.Err() == nil {
		err := d.listenOnce(ctx, channel, heard)
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

func (d *DB) listenOnce(ctx context.Context, channel string, heard func(context.Context)) error {
	conn, err := pgx.ConnectConfig(ctx, d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		heard(ctx)
	}
}

package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A channel name that needs quoting: the LISTEN must quote it as pg_notify
// names it.
const channel = "a channel"

func TestNotifySendsEachPayloadAsANotificationOfItsOwnToAListenerOfThatChannel(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(f.ctx)
	listening, heard, ended := make(chan struct{}), make(chan string, 4), make(chan error, 1)
	go func() {
		ended <- f.db.ListenOnce(ctx, channel, func() { close(listening) }, func(p string) { heard <- p })
	}()
	select {
	case <-listening:
	case err := <-ended:
		t.Fatalf("no LISTEN: %v", err)
	}
	require.NoError(t, f.db.Notify(f.ctx, channel, []string{"q1:p1", "q1:p2"}))
	require.NoError(t, f.db.Notify(f.ctx, "another channel", []string{"q2:p3"}))
	var got []string
	for len(got) < 2 {
		select {
		case p := <-heard:
			got = append(got, p)
		case <-time.After(10 * time.Second):
			t.Fatalf("heard %v of the two payloads", got)
		}
	}
	require.Equal(t, []string{"q1:p1", "q1:p2"}, got)
	cancel()
	require.Error(t, <-ended, "ListenOnce ends with its context, saying why")
	require.Empty(t, heard, "nothing from another channel")
}

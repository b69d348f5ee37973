package queue_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

// traced is the broker of the tests that need --store-traceparent.
var traced = brokertest.NewGroup(brokertest.WithTraceparents)

// pushTraced pushes one message to queue with a traceparent header.
func pushTraced(t *testing.T, b *brokertest.Broker, queue, traceparent string) {
	t.Helper()
	postTraced(t, b, "/api/v1/push", `{"items":[{"queue":"`+queue+`","payload":1}]}`, traceparent)
}

// postTraced posts body to path with a traceparent header and wants a 2xx.
func postTraced(t *testing.T, b *brokertest.Broker, path, body, traceparent string) {
	t.Helper()
	req, err := http.NewRequest("POST", b.URL+path, bytes.NewBufferString(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent)
	if b.Token != "" {
		req.Header.Set("Authorization", "Bearer "+b.Token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Less(t, resp.StatusCode, 300)
}

// TestPushTraceparentIsStoredAndReturnedOnPop: with --store-traceparent,
// and tracing off (its default), the producer's W3C traceparent is kept
// with the message and handed to its consumer, so that the consumer's span
// continues the trace.
func TestPushTraceparentIsStoredAndReturnedOnPop(t *testing.T) {
	t.Parallel()
	b := traced.Shared(t)
	q := b.Q("traced")
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	pushTraced(t, b, q, tp)
	b.PushN(t, q, "", 0, 1)
	msgs := b.PopAll(t, "/api/v1/pop/queue/"+q+"?batch=10&autoAck=true")
	require.Len(t, msgs, 2)
	require.Equal(t, tp, msgs[0].Traceparent)
	require.Empty(t, msgs[1].Traceparent, "a message pushed without a traceparent carries none")
	frames := b.Frames(t, b.Tenant, q)
	require.Equal(t, tp, frames[0].Traceparent, "stored in the message's segment frame")
}

// TestPushMalformedTraceparentIsIgnored: the W3C spec says a receiver
// ignores a traceparent it cannot parse rather than refusing the request.
func TestPushMalformedTraceparentIsIgnored(t *testing.T) {
	t.Parallel()
	b := traced.Shared(t)
	q := b.Q("badtrace")
	pushTraced(t, b, q, "00-00000000000000000000000000000000-00f067aa0ba902b7-01")
	msgs := b.PopAll(t, "/api/v1/pop/queue/"+q+"?autoAck=true")
	require.Len(t, msgs, 1)
	require.Empty(t, msgs[0].Traceparent)
}

func TestTransactionPushTraceparentIsStoredAndReturnedOnPop(t *testing.T) {
	t.Parallel()
	b := traced.Shared(t)
	q := b.Q("txtraced")
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	postTraced(t, b, "/api/v1/transaction",
		`{"operations":[{"type":"push","items":[{"queue":"`+q+`","payload":1}]}]}`, tp)
	msgs := b.PopAll(t, "/api/v1/pop/queue/"+q+"?autoAck=true")
	require.Len(t, msgs, 1)
	require.Equal(t, tp, msgs[0].Traceparent)
}

// TestPushTraceparentIsNotStoredUntilTheSettingIsOn: a frame that carries a
// traceparent is corrupt to a broker of the release before, so by default
// the header is not stored, and a rolling upgrade leaves every message
// readable by the replicas it has not replaced yet.
func TestPushTraceparentIsNotStoredUntilTheSettingIsOn(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	untraced := b.Q("untraced")
	pushTraced(t, b, untraced, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	frames := b.Frames(t, b.Tenant, untraced)
	require.Len(t, frames, 1)
	require.Empty(t, frames[0].Traceparent, "no traceparent in the stored frame")
	msgs := b.PopAll(t, "/api/v1/pop/queue/"+untraced+"?autoAck=true")
	require.Len(t, msgs, 1)
	require.Empty(t, msgs[0].Traceparent)
}

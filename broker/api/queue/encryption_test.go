package queue_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestEncryptedQueueSealsPayloadsAndPopOpensThem(t *testing.T) {
	t.Parallel()
	key, _ := brokertest.KeyFile(t)
	b := brokertest.Start(t, func(c *config.Config) { c.EncryptionKey = key })
	b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": "secret", "options": map[string]any{"encryptionEnabled": true}})
	b.Push(t, map[string]any{"queue": "secret", "payload": map[string]any{"card": "4111"}})
	b.Push(t, map[string]any{"queue": "plain", "payload": map[string]any{"card": "4111"}})

	frames := b.Frames(t, b.Tenant, "secret")
	require.True(t, frames[0].Sealed())
	require.NotContains(t, string(frames[0].Payload), "4111")
	p := b.Pop(t, "/api/v1/pop/queue/secret")
	require.Equal(t, map[string]any{"card": "4111"}, p.Messages[0].Data)
	p = b.Pop(t, "/api/v1/pop/queue/plain")
	require.Equal(t, map[string]any{"card": "4111"}, p.Messages[0].Data)
}

func TestEncryptionWithoutAKeyStoresPlaintextAndCountsTheFailure(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": "secret", "options": map[string]any{"encryptionEnabled": true}})
	out := b.Push(t, map[string]any{"queue": "secret", "payload": 1}, map[string]any{"queue": "secret", "payload": 2})
	require.Equal(t, "queued", out[0]["status"])
	frames := b.Frames(t, b.Tenant, "secret")
	require.False(t, frames[0].Sealed())
	require.Equal(t, "1", string(frames[0].Payload))
	metrics := b.Scrape(t)
	require.Contains(t, metrics, "regent_encryption_failures_total 2")
	require.True(t, strings.Contains(metrics, `regent_messages_pushed_total{queue="secret",tenant="`+b.Tenant+`"} 2`), metrics)
}

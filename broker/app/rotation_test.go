package app_test

import (
	"testing"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

// keyIDs lists the key id of every stored frame of the vault queue, in
// offset order, and fails on a frame stored in plaintext.
func keyIDs(t *testing.T, b *brokertest.Broker) []uint32 {
	t.Helper()
	var ids []uint32
	for _, f := range b.Frames(t, b.Tenant, "vault") {
		if !f.Sealed() {
			t.Fatalf("a frame of the encrypted queue is stored in plaintext: %s", f.Payload)
		}
		ids = append(ids, f.KeyID)
	}
	return ids
}

func TestKeyRotationNewWritesUseTheNewKeyAndReadsAcceptTheOld(t *testing.T) {
	db := pgtest.URL(t)
	oldKey, oldID := brokertest.KeyFile(t)
	newKey, newID := brokertest.KeyFile(t)
	push := func(b *brokertest.Broker, payload string) {
		t.Helper()
		r := b.Do(t, "POST", "/api/v1/push", "", map[string]any{"items": []any{map[string]any{"queue": "vault", "payload": payload}}})
		if r.Status != 201 {
			t.Fatalf("push = %d %s", r.Status, r.Body)
		}
	}

	before := brokertest.StartOn(t, db, func(c *config.Config) { c.EncryptionKey = oldKey })
	if r := before.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": "vault", "options": map[string]any{"encryptionEnabled": true}}); r.Status != 200 {
		t.Fatalf("configure = %d %s", r.Status, r.Body)
	}
	push(before, "sealed under the old key")

	// The rotated broker: the new key is current, the old one retired.
	after := brokertest.StartOn(t, db, func(c *config.Config) {
		c.EncryptionKey, c.EncryptionOld = newKey, []string{oldKey}
	})
	push(after, "sealed under the new key")
	if got := keyIDs(t, after); len(got) != 2 || got[0] != oldID || got[1] != newID {
		t.Fatalf("frames are sealed under keys %x, want [%x %x]", got, oldID, newID)
	}
	var pop struct {
		Messages []struct {
			Data string `json:"data"`
		} `json:"messages"`
	}
	after.Do(t, "GET", "/api/v1/pop/queue/vault?batch=10", "", nil).JSON(t, &pop)
	if len(pop.Messages) != 2 || pop.Messages[0].Data != "sealed under the old key" || pop.Messages[1].Data != "sealed under the new key" {
		t.Fatalf("the rotated broker pops %+v", pop.Messages)
	}
}

func TestPushStampsProducerSubFromTheTokenAndIgnoresTheBody(t *testing.T) {
	b := authNoTenancy.Shared(t)
	tok, err := auth.MintHS256([]byte(brokertest.Secret), auth.MintClaims{Subject: "svc-orders", Tenant: auth.DefaultTenant, Role: auth.ReadWrite})
	if err != nil {
		t.Fatal(err)
	}
	r := b.Do(t, "POST", "/api/v1/push", tok, map[string]any{"items": []any{
		map[string]any{"queue": b.Q("q"), "payload": 1, "producerSub": "someone-else"}}})
	if r.Status != 201 {
		t.Fatalf("push = %d %s", r.Status, r.Body)
	}
	var pop struct {
		Messages []struct {
			ProducerSub string `json:"producerSub"`
		} `json:"messages"`
	}
	b.Do(t, "GET", "/api/v1/pop/queue/"+b.Q("q"), tok, nil).JSON(t, &pop)
	if len(pop.Messages) != 1 || pop.Messages[0].ProducerSub != "svc-orders" {
		t.Fatalf("popped %+v, want producerSub svc-orders from the token", pop.Messages)
	}
}

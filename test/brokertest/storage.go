package brokertest

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/regent-mq/regent/broker/domain/seal"
	"github.com/regent-mq/regent/broker/domain/segment"
)

// Frames decodes the frames stored for a tenant's queue, straight from
// queen.log_segments, in partition and offset order: what PostgreSQL holds,
// as opposed to what a pop answers.
func (b *Broker) Frames(t testing.TB, tenant, queue string) []segment.Frame {
	t.Helper()
	parts, err := b.Log(context.Background(), tenant, queue)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	var out []segment.Frame
	for _, p := range parts {
		out = append(out, p.Frames...)
	}
	return out
}

// Partition is one partition's stored frames, in offset order.
type Partition struct {
	Name   string
	Frames []segment.Frame
}

// Log reads the frames of a tenant's queue by partition, in partition name
// order, without consuming anything: an oracle that a failed pop cannot
// skew, safe to call from any goroutine.
func (b *Broker) Log(ctx context.Context, tenant, queue string) ([]Partition, error) {
	rows, err := b.Pool.Query(ctx, `SELECT p.name, s.body, s.checksum, s.frame_count FROM queen.log_segments s
		JOIN queen.partitions p ON p.id = s.partition_id JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.tenant = $1 AND q.name = $2 ORDER BY p.name, s.base_offset`, tenant, queue)
	if err != nil {
		return nil, fmt.Errorf("read the segments of %q: %w", queue, err)
	}
	defer rows.Close()
	var out []Partition
	for rows.Next() {
		var name string
		var body []byte
		var sum int64
		var n int
		if err := rows.Scan(&name, &body, &sum, &n); err != nil {
			return nil, fmt.Errorf("read a segment of %q: %w", queue, err)
		}
		frames, err := segment.Decode(body, uint64(sum), n)
		if err != nil {
			return nil, fmt.Errorf("decode a segment of %q/%s: %w", queue, name, err)
		}
		if len(out) == 0 || out[len(out)-1].Name != name {
			out = append(out, Partition{Name: name})
		}
		out[len(out)-1].Frames = append(out[len(out)-1].Frames, frames...)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the segments of %q: %w", queue, err)
	}
	return out, nil
}

// KeyFile writes a fresh random payload key to a file and returns its path
// and key id.
func KeyFile(t testing.TB) (string, uint32) {
	t.Helper()
	k := make([]byte, seal.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatalf("brokertest: make key: %v", err)
	}
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, k, 0o600); err != nil {
		t.Fatalf("brokertest: write key: %v", err)
	}
	return path, seal.KeyID(k)
}

// Announcement is what hotlist.Channel carries when a partition of the named
// queue is announced: its queue id and partition id, "<queue>:<partition>".
func (b *Broker) Announcement(t testing.TB, queue, partition string) string {
	t.Helper()
	var payload string
	if err := b.Pool.QueryRow(context.Background(), `SELECT q.id::text || ':' || p.id::text FROM queen.partitions p
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1 AND p.name = $2`, queue, partition).Scan(&payload); err != nil {
		t.Fatalf("brokertest: partition %s of queue %s: %v", partition, queue, err)
	}
	return payload
}

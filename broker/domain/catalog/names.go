// Package catalog is what the broker knows about queues and partitions
// besides their data, and depends on nothing that talks to PostgreSQL or
// HTTP: the cache of their ids and of the queue options the broker reads
// in memory (Catalog, over a Store that broker/pg/db implements), the
// tenancy gate on partition ids (OwnedPartition), the name rules, the
// shared defaults (DefaultPartition, QueueMode), and the errors of a
// lookup. The seam (broker/pg/db) and the write path (broker/domain/produce) both
// import it.
//
// Resolve (or ResolveAll) turns (tenant, queue, partition) into a
// *Partition, creating a queue and partition that do not exist with default
// options. Answers are cached for optionsTTL at most, and only while they
// stay among the most recently used (New's size); past it a cached partition
// is read again by its id, and by name only when the id is gone; Invalidate drops a tenant's
// queue (the queue deletion route does it, and so must any caller whose
// push failed with ErrPartitionGone, because another replica deleted the
// queue behind the cache). OwnedPartition answers ErrNotFound for a
// partition that does not exist and another tenant's alike.
package catalog

import (
	"errors"
	"fmt"
	"regexp"
)

// DefaultPartition is the partition of an item or pop that names none.
const DefaultPartition = "Default"

// QueueMode is the consumer group of a request that names none: plain
// competing consumers. queen.pop_v2 knows it too, for its subscription rule.
const QueueMode = "__QUEUE_MODE__"

var (
	// ErrNotFound is returned for a missing queue or partition, and for one
	// owned by another tenant: the two are indistinguishable on purpose.
	ErrNotFound = errors.New("not found")
	// ErrPartitionGone is returned by a push whose partition was deleted
	// after it was resolved; invalidate the cached queue and resolve again.
	ErrPartitionGone = errors.New("partition not found")
)

// queueName is the name rule for queues (queue-api.md, configure).
var queueName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,255}$`)

// maxPartitionName bounds partition names, which have no other rule.
const maxPartitionName = 255

// BadName is a queue or partition name that breaks the naming rules.
type BadName struct{ Message string }

func (e *BadName) Error() string { return e.Message }

// CheckNames applies the name rules to a queue and a partition.
func CheckNames(queue, partition string) error {
	if err := CheckQueueName(queue); err != nil {
		return err
	}
	if partition == "" || len(partition) > maxPartitionName {
		return &BadName{fmt.Sprintf("Invalid partition name %q: use 1-%d bytes", partition, maxPartitionName)}
	}
	return nil
}

// CheckQueueName applies the queue-name rule of queue-api.md.
func CheckQueueName(queue string) error {
	if !queueName.MatchString(queue) {
		return &BadName{fmt.Sprintf("Invalid queue name %q: use 1-255 letters, digits, '_', '.' or '-'", queue)}
	}
	return nil
}

package produce

import (
	"errors"

	"github.com/regent-mq/regent/broker/catalog"
	"github.com/regent-mq/regent/broker/db"
)

// Store is the loop every write into the log ends in, whoever stores the
// packed segments (a push, a cycle's sink emits). try stores them in one
// call. When the database already held some of their client transaction
// ids, nothing was stored: drop takes those items out and try runs again.
// When a partition was deleted behind the cache (catalog.ErrPartitionGone),
// the items' queues are forgotten, repack packs the items again, and try
// runs again, once. A write that cannot run again, inside the caller's
// transaction, passes a nil repack and gets the error.
func (l *Producer) Store(tenant string, items []Item, try func() (db.Duplicates, error), drop func(db.Duplicates), repack func() error) error {
	for resolved := false; ; {
		dups, err := try()
		switch {
		case errors.Is(err, catalog.ErrPartitionGone) && !resolved && repack != nil:
			resolved = true
			for _, it := range items {
				l.catalog.Invalidate(tenant, it.Queue)
			}
			if err := repack(); err != nil {
				return err
			}
		case err != nil:
			return err
		case dups != nil:
			drop(dups)
		default:
			return nil
		}
	}
}

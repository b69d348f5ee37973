package counters

import (
	"context"
	"time"
)

// At pins the counters' clock.
func At(c *Counters, t time.Time) { c.now = func() time.Time { return t } }

// SampleNow writes a sample of the process, as Run does once a minute.
func SampleNow(ctx context.Context, db Store, replica string, now time.Time) error {
	return newSampler().sample(ctx, db, replica, now)
}

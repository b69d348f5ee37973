package queuestore

import (
	"testing"

	"github.com/regent-mq/regent/test/pgtest"
)

// The package's cluster is stopped and its directory removed when the
// tests end; without it, PostgreSQL died with the test binary and its
// directory stayed behind.
func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

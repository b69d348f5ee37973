package queue_test

import (
	"testing"

	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

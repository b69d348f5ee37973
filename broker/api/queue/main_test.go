package queue_test

import (
	"testing"

	"github.com/regent-mq/regent/test/brokertest"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

package auth

import (
	"testing"

	"go.uber.org/goleak"
)

// The JWK Set's refresh and the identity providers the tests start run
// goroutines: none may outlive the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

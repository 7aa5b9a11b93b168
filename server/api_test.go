package server_test

import (
	"testing"

	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestAPI runs the HTTP suite on the data-directory storage.
func TestAPI(t *testing.T) {
	apitest.Run(t, func(t *testing.T, opts testenv.Options) *testenv.Env { return testenv.New(t, opts) })
}

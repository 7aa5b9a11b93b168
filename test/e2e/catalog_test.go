package e2e

import (
	"context"
	"testing"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

func openCatalog(t *testing.T, e *testenv.Env) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Open(context.Background(), e.Config.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

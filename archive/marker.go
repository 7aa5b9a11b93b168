package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
)

// Bind proves the bucket and prefix of s belong to the catalog catalogID:
// the first start writes the marker create-only; every later start reads
// it. Two catalogs on one prefix would delete each other's objects as
// orphans (docs/FORMAT.md, "The bucket").
func Bind(ctx context.Context, s objstore.Store, catalogID ids.ID) error {
	want := catalogID.String() + "\n"
	err := objstore.Put(ctx, s, MarkerKey, strings.NewReader(want), true)
	if err == nil {
		return nil
	}
	if !errors.Is(err, objstore.ErrExists) {
		return fmt.Errorf("the storage cannot be used: writing the catalog marker to %s: %w", s, err)
	}
	rc, err := s.Get(ctx, MarkerKey)
	if err != nil {
		return fmt.Errorf("the storage cannot be used: reading the catalog marker of %s: %w", s, err)
	}
	defer rc.Close()
	got, err := io.ReadAll(io.LimitReader(rc, 256))
	if err != nil {
		return fmt.Errorf("the storage cannot be used: reading the catalog marker of %s: %w", s, err)
	}
	if !bytes.Equal(got, []byte(want)) {
		return fmt.Errorf("the storage cannot be used: %s belongs to another catalog (its %s names %s, this catalog is %s); give each server its own bucket or prefix", s, MarkerKey, strings.TrimSpace(string(got)), catalogID)
	}
	return nil
}

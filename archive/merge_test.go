package archive

import (
	"reflect"
	"testing"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
)

// TestChooseMerges: the merge's plan (docs/FORMAT.md, "Merge") is made from
// the live files alone: per date, in the order listed, the small files
// without a purge under way, taken while the merged file stays within the
// bound (two whatever their size), merged only two or more at a time.
func TestChooseMerges(t *testing.T) {
	const target, maxBytes = 100, 150
	file := func(n byte, date string, size int64) catalog.PackFile {
		return catalog.PackFile{ID: ids.ID{n}, Date: date, Bytes: size}
	}
	files := []catalog.PackFile{
		file(1, "2024-01-02", 90),
		file(2, "2024-01-01", 40),
		file(3, "2024-01-02", 100), // not small
		file(4, "2024-01-01", 50),  // a purge under way
		file(5, "2024-01-02", 95),
		file(6, "2024-01-02", 80), // past the bound: 90 + 95 + 80 > 150
		file(7, "2024-01-03", 10), // alone on its date
		file(8, "2024-01-01", 60),
		file(9, "2024-01-04", 99),
		file(10, "2024-01-04", 99), // two are taken whatever the bound
		file(11, "2024-01-04", 99),
		file(12, "2024-01-01", 30), // within the bound: 40 + 60 + 30
	}
	purging := map[ids.ID]bool{{4}: true}
	var got [][]byte
	for _, sel := range chooseMerges(files, purging, target, maxBytes) {
		var names []byte
		for _, f := range sel {
			if f.Date != sel[0].Date {
				t.Errorf("a merge of %s takes a file of %s", sel[0].Date, f.Date)
			}
			names = append(names, f.ID[0])
		}
		got = append(got, names)
	}
	want := [][]byte{{1, 5}, {2, 8, 12}, {9, 10}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merges %v, want %v", got, want)
	}
	if m := chooseMerges(files[:1], nil, target, maxBytes); len(m) != 0 {
		t.Errorf("one small file merged: %v", m)
	}
}

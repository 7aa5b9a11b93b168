package translog

import (
	"fmt"
	"strconv"
	"strings"
)

// TileHeight is the height of a C2SP tlog-tiles tile: 256 hashes wide.
const TileHeight = 8

// TileWidth is the number of hashes of a full tile.
const TileWidth = 1 << TileHeight

// A Tile is one resource of the tlog-tiles layout: the hashes of level
// Level (tree level 8·Level) at indexes N·256 to N·256+Width-1, or, with
// Entries, the bundle of those records.
type Tile struct {
	Entries bool
	Level   int
	N       uint64
	Width   int // 1 to 256; 256 is a full tile
}

// ParseTile reads a tile path below tile/: "<L>/<N>[.p/<W>]" or
// "entries/<N>[.p/<W>]", <N> in 3-digit elements, all but the last
// beginning with x. Anything else is refused, so that one tile has one
// path.
func ParseTile(p string) (Tile, error) {
	bad := fmt.Errorf("translog: %q is not a tile path: tile/<L>/<N>[.p/<W>] or tile/entries/<N>[.p/<W>], <N> as x001/x234/067", p)
	var t Tile
	head, rest, ok := strings.Cut(p, "/")
	if !ok {
		return t, bad
	}
	if head == "entries" {
		t.Entries = true
	} else {
		l, err := strconv.Atoi(head)
		if err != nil || l < 0 || l > 63 || strconv.Itoa(l) != head {
			return t, bad
		}
		t.Level = l
	}
	t.Width = TileWidth
	if i := strings.Index(rest, ".p/"); i >= 0 {
		w, err := strconv.Atoi(rest[i+3:])
		if err != nil || w < 1 || w > 255 || strconv.Itoa(w) != rest[i+3:] {
			return t, bad
		}
		t.Width, rest = w, rest[:i]
	}
	elems := strings.Split(rest, "/")
	for i, e := range elems {
		if i < len(elems)-1 {
			if !strings.HasPrefix(e, "x") {
				return t, bad
			}
			e = e[1:]
		}
		if len(e) != 3 || strings.Trim(e, "0123456789") != "" {
			return t, bad
		}
		d, _ := strconv.Atoi(e)
		if t.N > (1<<64-1)/1000 {
			return t, bad
		}
		t.N = t.N*1000 + uint64(d)
	}
	if len(elems) > 1 && elems[0] == "x000" {
		return t, bad // leading zeroes
	}
	return t, nil
}

// Path is the tile's path below tile/.
func (t Tile) Path() string {
	n := fmt.Sprintf("%03d", t.N%1000)
	for x := t.N / 1000; x > 0; x /= 1000 {
		n = fmt.Sprintf("x%03d/", x%1000) + n
	}
	head := strconv.Itoa(t.Level)
	if t.Entries {
		head = "entries"
	}
	p := head + "/" + n
	if t.Width < TileWidth {
		p += ".p/" + strconv.Itoa(t.Width)
	}
	return p
}

// Fits reports whether the tree of size leaves holds t: a full tile, or
// the partial one of exactly the width the tree gives it. A partial tile
// of another width is never served (tlog-tiles).
func (t Tile) Fits(size uint64) bool {
	level := uint(t.Level) * TileHeight
	if t.Entries {
		level = 0
	}
	if level >= 64 {
		return false
	}
	nodes := size >> level // complete nodes at that level
	full := nodes / TileWidth
	if t.Width == TileWidth {
		return t.N < full
	}
	return t.N == full && uint64(t.Width) == nodes%TileWidth
}

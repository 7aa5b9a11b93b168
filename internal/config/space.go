package config

import (
	"strconv"
	"strings"
)

// MinFree is the free space the data directory's file system keeps:
// below it stores are refused (docs/configuration.md, min_free). One of
// the two is set.
type MinFree struct {
	Bytes   int64   // a size
	Percent float64 // a percentage of the file system's size, more than 0 and less than 100
}

// String writes it as the configuration does.
func (m MinFree) String() string {
	if m.Percent > 0 {
		return strconv.FormatFloat(m.Percent, 'f', -1, 64) + "%"
	}
	return strconv.FormatInt(m.Bytes, 10)
}

// minFree reads a size such as "1GiB" or a percentage such as "5%".
func (b *builder) minFree(key string, v any) MinFree {
	s, ok := v.(string)
	if !ok || !strings.HasSuffix(s, "%") {
		return MinFree{Bytes: b.size(key, v)}
	}
	num := strings.TrimSuffix(s, "%")
	p, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" || strings.Trim(num, "0123456789.") != "" || !(p > 0 && p < 100) {
		b.fail(`%s must be a size such as "1GiB" or a percentage of the file system from more than 0 to less than 100 such as "5%%", not %q`, key, s)
		return MinFree{}
	}
	return MinFree{Percent: p}
}

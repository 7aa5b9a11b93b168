// Package units reads and writes the sizes and day counts of the configuration
// and the admin API: binary sizes only, retention in whole days.
package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Sizes take binary units only. "MB" is refused rather than read as 10^6:
// an operator who writes "64MB" most likely means 64 MiB, and a limit that
// is silently 5% off is worse than a refusal that names the unit to use.
var sizeUnits = []struct {
	suffix string
	bytes  int64
}{
	{"KiB", 1 << 10},
	{"MiB", 1 << 20},
	{"GiB", 1 << 30},
	{"B", 1},
}

// SizeRule says what a size may be, for refusals.
const SizeRule = `a whole number of bytes, or of KiB, MiB or GiB (powers of 1024), such as "64MiB"`

// ParseSize reads a size: "64MiB", "512KiB", "1GiB", "1000B" or "1000"
// (bytes). KiB, MiB and GiB are powers of 1024; decimal units (KB, MB, GB)
// are refused. A space may separate the number from its unit.
func ParseSize(s string) (int64, error) {
	n, err := Size(s)
	if err != nil {
		return 0, fmt.Errorf("size %w", err)
	}
	return n, nil
}

// Size reads a size as ParseSize does, with an error that reads after the
// name of what was set: "<name> must be ..., not ...".
func Size(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = strings.TrimSuffix(rest, " "), u.bytes
			break
		}
	}
	if num == "" || strings.Trim(num, "0123456789") != "" {
		return 0, fmt.Errorf("must be %s, not %q", SizeRule, s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("must be at most 8 EiB, not %q", s)
	}
	return n * mult, nil
}

// maxDays is the longest retention a time.Duration holds.
const maxDays = int64(math.MaxInt64 / int64(24*time.Hour))

// ParseDays reads a retention period: a whole number of days, "30d" or
// "0d". A bare number is refused: "30" could be meant as seconds.
func ParseDays(s string) (time.Duration, error) {
	d, err := Days(s)
	if err != nil {
		return 0, errors.New("retention " + err.Error())
	}
	return d, nil
}

// Days reads days as ParseDays does, with an error that reads after the
// name of what was set.
func Days(s string) (time.Duration, error) {
	num, ok := strings.CutSuffix(s, "d")
	if !ok || num == "" || strings.Trim(num, "0123456789") != "" {
		return 0, fmt.Errorf(`must be a number of days such as "30d" or "0d", not %q`, s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > maxDays {
		return 0, fmt.Errorf("must be at most %dd, not %q", maxDays, s)
	}
	return time.Duration(n) * 24 * time.Hour, nil
}

// FormatDays writes d as ParseDays reads it. Retention periods are whole
// days; a part of a day is dropped.
func FormatDays(d time.Duration) string {
	return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
}

// ParseWindow reads a time window, since and until in RFC 3339 ("" for
// no bound), as the audit export, the Parquet export and GET /admin/log
// take it; sinceName and untilName are what the refusal calls them
// ("--since" on the command line).
func ParseWindow(since, until, sinceName, untilName string) (time.Time, time.Time, error) {
	s, err := parseTime(since)
	if err != nil {
		return s, s, err
	}
	u, err := parseTime(until)
	if err != nil {
		return s, u, err
	}
	if !s.IsZero() && !u.IsZero() && !s.Before(u) {
		return s, u, fmt.Errorf("%s %s is not before %s %s", sinceName, since, untilName, until)
	}
	return s, u, nil
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return t, fmt.Errorf("%q is not an RFC 3339 time such as 2026-11-05T00:00:00Z", s)
	}
	return t, nil
}

package units

import (
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
	}{
		{"64MiB", 64 << 20},
		{"16MiB", 16 << 20},
		{"512KiB", 512 << 10},
		{"1GiB", 1 << 30},
		{"1000B", 1000},
		{"1000", 1000},
		{"0", 0},
		{"64 MiB", 64 << 20},
		{"8589934591GiB", 8589934591 << 30},
		{"9223372036854775807", 1<<63 - 1},
	} {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{
		"", "MiB", "64MB", "64KB", "1GB", "64mib", "64M", "64 ", " 64", "64  MiB", "-1", "+1",
		"1.5GiB", "1e6", "0x10", "64MiBs", "8589934592GiB", "9223372036854775808",
	} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want a refusal", in, got)
		} else if !strings.HasPrefix(err.Error(), "size must be") {
			t.Errorf("ParseSize(%q): %v", in, err)
		}
	}
	_, err := ParseSize("64MB")
	if want := `size must be a whole number of bytes, or of KiB, MiB or GiB (powers of 1024), such as "64MiB", not "64MB"`; err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestParseDays(t *testing.T) {
	day := 24 * time.Hour
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{
		{"30d", 30 * day},
		{"0d", 0},
		{"1d", day},
		{"365d", 365 * day},
		{"030d", 30 * day},
		{"106751d", 106751 * day},
	} {
		got, err := ParseDays(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDays(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"30", "d", "", "30D", "-1d", "+1d", "1.5d", "30 d", " 30d", "30days", "720h", "1w", "106752d", "99999999999999999999d"} {
		if got, err := ParseDays(in); err == nil {
			t.Errorf("ParseDays(%q) = %v, want a refusal", in, got)
		}
	}
	_, err := ParseDays("30")
	if want := `retention must be a number of days such as "30d" or "0d", not "30"`; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestFormatDays(t *testing.T) {
	for _, tt := range []struct {
		in   time.Duration
		want string
	}{
		{0, "0d"},
		{24 * time.Hour, "1d"},
		{30 * 24 * time.Hour, "30d"},
		{36 * time.Hour, "1d"},
	} {
		if got := FormatDays(tt.in); got != tt.want {
			t.Errorf("FormatDays(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, s := range []string{"0d", "30d", "106751d"} {
		d, _ := ParseDays(s)
		if got := FormatDays(d); got != s {
			t.Errorf("round trip %q: %q", s, got)
		}
	}
}

package config

import "testing"

func TestMinFree(t *testing.T) {
	for text, want := range map[string]MinFree{
		``:                   {Bytes: 1 << 30},
		`min_free = "64MiB"`: {Bytes: 64 << 20},
		`min_free = 1048576`: {Bytes: 1 << 20},
		`min_free = "5%"`:    {Percent: 5},
		`min_free = "0.5%"`:  {Percent: 0.5},
	} {
		c, err := Parse([]byte(text), "")
		if err != nil {
			t.Errorf("%s: %v", text, err)
			continue
		}
		if c.MinFree != want {
			t.Errorf("%s: %+v, want %+v", text, c.MinFree, want)
		}
	}
	for text, want := range map[string]string{
		`min_free = "0%"`:   `configuration: min_free must be a size such as "1GiB" or a percentage of the file system from more than 0 to less than 100 such as "5%", not "0%"`,
		`min_free = "100%"`: `configuration: min_free must be a size such as "1GiB" or a percentage of the file system from more than 0 to less than 100 such as "5%", not "100%"`,
		`min_free = "-5%"`:  `configuration: min_free must be a size such as "1GiB" or a percentage of the file system from more than 0 to less than 100 such as "5%", not "-5%"`,
		`min_free = "%"`:    `configuration: min_free must be a size such as "1GiB" or a percentage of the file system from more than 0 to less than 100 such as "5%", not "%"`,
		`min_free = "1GB"`:  `configuration: min_free must be a whole number of bytes, or of KiB, MiB or GiB (powers of 1024), such as "64MiB", not "1GB"`,
		`min_free = 0`:      `configuration: min_free must be more than 0`,
		`min_free = true`:   `configuration: min_free must be a whole number of bytes, or of KiB, MiB or GiB (powers of 1024), such as "64MiB", not true`,
	} {
		_, err := Parse([]byte(text), "")
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", text, err, want)
		}
	}
}

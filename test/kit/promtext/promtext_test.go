package promtext

import (
	"strings"
	"testing"
)

const good = `# HELP a_total Things, with \\ and \n escaped.
# TYPE a_total counter
a_total{route="GET /x",code="2xx"} 3
a_total{route="q\"uote\\d\n",code="5xx"} 1 1700000000000
# A plain comment.
# TYPE b gauge
b -2.5e-3

# HELP h Latency.
# TYPE h histogram
h_bucket{r="x",le="0.5"} 1
h_bucket{r="x",le="1"} 2
h_bucket{r="x",le="+Inf"} 2
h_sum{r="x"} 1.2
h_count{r="x"} 2
h_bucket{r="y",le="0.5"} 0
h_bucket{r="y",le="1"} 0
h_bucket{r="y",le="+Inf"} 0
h_sum{r="y"} 0
h_count{r="y"} 0
# TYPE n gauge
n NaN
`

func TestGood(t *testing.T) {
	fs, err := Parse(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := fs.Value("a_total", "route", "q\"uote\\d\n", "code", "5xx"); !ok || v != 1 {
		t.Errorf("escaped label: %v %v", v, ok)
	}
	if fs["a_total"].Help != "Things, with \\ and \n escaped." {
		t.Errorf("help %q", fs["a_total"].Help)
	}
	if v, _ := fs.Value("h_count", "r", "x"); v != 2 {
		t.Errorf("h_count %v", v)
	}
	if got := fs.Sum("a_total"); got != 4 {
		t.Errorf("sum %v", got)
	}
}

func TestRefused(t *testing.T) {
	cases := map[string]string{
		"no final newline":        "# TYPE a counter\na 1",
		"sample before TYPE":      "a 1\n",
		"TYPE after samples":      "# TYPE a counter\na 1\n# TYPE a counter\n",
		"unknown type":            "# TYPE a countr\na 1\n",
		"second HELP":             "# HELP a x\n# HELP a y\n# TYPE a counter\na 1\n",
		"HELP without TYPE":       "# HELP a x\n",
		"bad metric name":         "# TYPE 1a counter\n1a 1\n",
		"bad label name":          "# TYPE a counter\na{1x=\"v\"} 1\n",
		"reserved label name":     "# TYPE a counter\na{__x=\"v\"} 1\n",
		"unquoted label":          "# TYPE a counter\na{x=v} 1\n",
		"unclosed quote":          "# TYPE a counter\na{x=\"v} 1\n",
		"bad escape":              "# TYPE a counter\na{x=\"\\t\"} 1\n",
		"duplicate label":         "# TYPE a counter\na{x=\"1\",x=\"2\"} 1\n",
		"no comma":                "# TYPE a counter\na{x=\"1\" y=\"2\"} 1\n",
		"duplicate series":        "# TYPE a counter\na{x=\"1\"} 1\na{x=\"1\"} 2\n",
		"split family":            "# TYPE a counter\na{x=\"1\"} 1\n# TYPE b gauge\nb 1\na{x=\"2\"} 1\n",
		"negative counter":        "# TYPE a counter\na -1\n",
		"bad value":               "# TYPE a gauge\na Inf\n",
		"hex value":               "# TYPE a gauge\na 0x10\n",
		"two spaces":              "# TYPE a gauge\na  1\n",
		"bad timestamp":           "# TYPE a gauge\na 1 1.5\n",
		"bucket without le":       "# TYPE h histogram\nh_bucket 1\nh_sum 1\nh_count 1\n",
		"histogram bare sample":   "# TYPE h histogram\nh 1\n",
		"buckets going down":      "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 2\n",
		"le out of order":         "# TYPE h histogram\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
		"no +Inf bucket":          "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",
		"+Inf differs from count": "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 2\n",
		"no count":                "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\n",
		"no sum":                  "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",
		"le on count":             "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count{le=\"1\"} 1\n",
	}
	for name, text := range cases {
		_, err := Parse(strings.NewReader(text))
		t.Logf("%s: %v", name, err)
		if err == nil {
			t.Errorf("%s: accepted:\n%s", name, text)
		}
	}
}

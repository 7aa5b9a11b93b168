// Package promtext is a strict parser of the Prometheus text exposition
// format (version 0.0.4), for tests: it refuses what a lenient scraper
// would let through (a sample before its TYPE, a family split in two, a
// duplicate series, a bad escape, a histogram whose buckets go down or
// whose +Inf bucket is not its count), so that a test which parses
// /metrics proves the page is one that Prometheus reads as meant.
package promtext

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Sample is one line of values: a series name, its labels and its value.
type Sample struct {
	Name   string // as written: with _bucket, _sum or _count for histograms
	Labels map[string]string
	Value  float64
}

// Family is every sample of one metric name, with its HELP and TYPE.
type Family struct {
	Name    string
	Help    string
	Type    string // counter, gauge, histogram, summary or untyped
	Samples []Sample
}

// Families maps a family name to the family.
type Families map[string]*Family

// Value returns the value of the sample named name (a family name, or a
// histogram's name_count / name_sum) whose labels are exactly labels
// (name, value pairs), and whether there is one.
func (fs Families) Value(name string, labels ...string) (float64, bool) {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	fam := fs[name]
	if fam == nil {
		for _, suffix := range []string{"_count", "_sum", "_bucket"} {
			if f := fs[strings.TrimSuffix(name, suffix)]; f != nil && strings.HasSuffix(name, suffix) {
				fam = f
			}
		}
	}
	if fam == nil {
		return 0, false
	}
	for _, s := range fam.Samples {
		if s.Name == name && sameLabels(s.Labels, want) {
			return s.Value, true
		}
	}
	return 0, false
}

// Sum adds the values of every sample named name whose labels include the
// given pairs (0 when none matches).
func (fs Families) Sum(name string, labels ...string) float64 {
	total := 0.0
	for _, fam := range fs {
		for _, s := range fam.Samples {
			if s.Name != name {
				continue
			}
			ok := true
			for i := 0; i+1 < len(labels); i += 2 {
				if s.Labels[labels[i]] != labels[i+1] {
					ok = false
				}
			}
			if ok {
				total += s.Value
			}
		}
	}
	return total
}

func sameLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Parse reads a whole exposition and checks it. Every family must have a
// TYPE line before its first sample; the error names the line.
func Parse(r io.Reader) (Families, error) {
	p := &parser{fams: Families{}, seen: map[string]bool{}, series: map[string]bool{}}
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			if line != "" {
				return nil, fmt.Errorf("line %d: the text does not end with a newline", p.n+1)
			}
			break
		}
		if err != nil {
			return nil, err
		}
		p.n++
		if err := p.line(strings.TrimSuffix(line, "\n")); err != nil {
			return nil, fmt.Errorf("line %d: %w: %q", p.n, err, line)
		}
	}
	for _, f := range p.fams {
		if f.Type == "" {
			return nil, fmt.Errorf("family %s has HELP but no TYPE", f.Name)
		}
		if f.Type == "histogram" {
			if err := checkHistogram(f); err != nil {
				return nil, err
			}
		}
	}
	return p.fams, nil
}

type parser struct {
	n       int
	fams    Families
	current string          // the family whose lines are being read
	seen    map[string]bool // families whose lines have ended
	series  map[string]bool // name + sorted labels, to refuse duplicates
}

func (p *parser) line(s string) error {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	if strings.HasPrefix(s, "#") {
		return p.comment(s)
	}
	return p.sample(s)
}

func (p *parser) family(name string) (*Family, error) {
	if name != p.current {
		if p.seen[name] {
			return nil, fmt.Errorf("the lines of family %s are split in two", name)
		}
		if p.current != "" {
			p.seen[p.current] = true
		}
		p.current = name
	}
	f := p.fams[name]
	if f == nil {
		f = &Family{Name: name}
		p.fams[name] = f
	}
	return f, nil
}

func (p *parser) comment(s string) error {
	fields := strings.SplitN(s, " ", 4)
	if len(fields) < 3 || fields[0] != "#" || (fields[1] != "HELP" && fields[1] != "TYPE") {
		return nil // a plain comment
	}
	name := fields[2]
	if !validName(name, true) {
		return fmt.Errorf("invalid metric name %q", name)
	}
	rest := ""
	if len(fields) == 4 {
		rest = fields[3]
	}
	f, err := p.family(name)
	if err != nil {
		return err
	}
	if fields[1] == "HELP" {
		if f.Help != "" {
			return fmt.Errorf("a second HELP for %s", name)
		}
		help, err := unescape(rest, false)
		if err != nil {
			return err
		}
		if help == "" {
			return fmt.Errorf("empty HELP for %s", name)
		}
		f.Help = help
		return nil
	}
	if f.Type != "" {
		return fmt.Errorf("a second TYPE for %s", name)
	}
	if len(f.Samples) > 0 {
		return fmt.Errorf("TYPE of %s after its samples", name)
	}
	switch rest {
	case "counter", "gauge", "histogram", "summary", "untyped":
		f.Type = rest
	default:
		return fmt.Errorf("unknown type %q", rest)
	}
	return nil
}

func (p *parser) sample(s string) error {
	i := 0
	for i < len(s) && s[i] != '{' && s[i] != ' ' {
		i++
	}
	name := s[:i]
	if !validName(name, true) {
		return fmt.Errorf("invalid metric name %q", name)
	}
	labels := map[string]string{}
	rest := s[i:]
	if strings.HasPrefix(rest, "{") {
		var err error
		labels, rest, err = parseLabels(rest[1:])
		if err != nil {
			return err
		}
	}
	if !strings.HasPrefix(rest, " ") {
		return fmt.Errorf("no value after the series")
	}
	parts := strings.Split(rest[1:], " ")
	if len(parts) > 2 || parts[0] == "" {
		return fmt.Errorf("a value and at most a timestamp must follow the series, one space apart")
	}
	v, err := parseValue(parts[0])
	if err != nil {
		return err
	}
	if len(parts) == 2 {
		if _, err := strconv.ParseInt(parts[1], 10, 64); err != nil {
			return fmt.Errorf("invalid timestamp %q", parts[1])
		}
	}
	famName := name
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base := strings.TrimSuffix(name, suffix)
		if base != name && p.fams[base] != nil && p.fams[base].Type == "histogram" {
			famName = base
		}
	}
	f, err := p.family(famName)
	if err != nil {
		return err
	}
	if f.Type == "" {
		return fmt.Errorf("sample of %s before its TYPE line", famName)
	}
	if f.Type == "histogram" {
		_, hasLe := labels["le"]
		switch {
		case name == famName:
			return fmt.Errorf("histogram %s has a sample without _bucket, _sum or _count", famName)
		case strings.HasSuffix(name, "_bucket") != hasLe:
			return fmt.Errorf("only the _bucket samples of a histogram have an le label")
		}
	}
	if f.Type == "counter" && (v < 0 || math.IsNaN(v)) {
		return fmt.Errorf("counter %s has the value %v", name, v)
	}
	key := seriesKey(name, labels)
	if p.series[key] {
		return fmt.Errorf("duplicate series %s", key)
	}
	p.series[key] = true
	f.Samples = append(f.Samples, Sample{Name: name, Labels: labels, Value: v})
	return nil
}

// parseLabels reads `name="value",...}` and returns what follows the brace.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	for {
		if strings.HasPrefix(s, "}") {
			return labels, s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return nil, "", fmt.Errorf("a label without =")
		}
		name := s[:eq]
		if !validName(name, false) || strings.HasPrefix(name, "__") {
			return nil, "", fmt.Errorf("invalid label name %q", name)
		}
		if _, dup := labels[name]; dup {
			return nil, "", fmt.Errorf("label %s given twice", name)
		}
		s = s[eq+1:]
		if !strings.HasPrefix(s, `"`) {
			return nil, "", fmt.Errorf("the value of label %s is not quoted", name)
		}
		// Find the closing quote: one not escaped by a backslash.
		end := -1
		for i := 1; i < len(s); i++ {
			if s[i] == '\\' {
				i++
				continue
			}
			if s[i] == '"' {
				end = i
				break
			}
		}
		if end < 0 {
			return nil, "", fmt.Errorf("the value of label %s has no closing quote", name)
		}
		v, err := unescape(s[1:end], true)
		if err != nil {
			return nil, "", err
		}
		labels[name] = v
		s = s[end+1:]
		switch {
		case strings.HasPrefix(s, ","):
			s = s[1:]
		case strings.HasPrefix(s, "}"):
		default:
			return nil, "", fmt.Errorf("labels must be separated by commas")
		}
	}
}

// unescape undoes the format's escapes: \\ and \n, and \" in label values.
// Any other backslash sequence is refused.
func unescape(s string, quoted bool) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", fmt.Errorf("a backslash at the end of %q", s)
		}
		i++
		switch {
		case s[i] == '\\':
			b.WriteByte('\\')
		case s[i] == 'n':
			b.WriteByte('\n')
		case s[i] == '"' && quoted:
			b.WriteByte('"')
		default:
			return "", fmt.Errorf("unknown escape \\%c", s[i])
		}
	}
	return b.String(), nil
}

func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	// ParseFloat also takes "inf", "Infinity", hex floats and underscores;
	// the format does not.
	for _, c := range s {
		if !strings.ContainsRune("0123456789+-.eE", c) {
			return 0, fmt.Errorf("invalid value %q", s)
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid value %q", s)
	}
	return v, nil
}

func validName(s string, colon bool) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		ok := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (colon && c == ':') || (i > 0 && c >= '0' && c <= '9')
		if !ok {
			return false
		}
	}
	return true
}

func seriesKey(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(name)
	for _, k := range keys {
		fmt.Fprintf(&b, ",%s=%q", k, labels[k])
	}
	return b.String()
}

// checkHistogram checks each series of a histogram (its labels but le):
// le values ascending and ending in +Inf, counts never going down, the
// +Inf bucket equal to _count, and _sum present.
func checkHistogram(f *Family) error {
	type series struct {
		les    []float64
		counts []float64
		count  *float64
		sum    bool
	}
	all := map[string]*series{}
	get := func(labels map[string]string) *series {
		rest := map[string]string{}
		for k, v := range labels {
			if k != "le" {
				rest[k] = v
			}
		}
		key := seriesKey("", rest)
		if all[key] == nil {
			all[key] = &series{}
		}
		return all[key]
	}
	for _, s := range f.Samples {
		x := get(s.Labels)
		switch {
		case strings.HasSuffix(s.Name, "_bucket"):
			le, err := parseValue(s.Labels["le"])
			if err != nil || math.IsNaN(le) {
				return fmt.Errorf("histogram %s: invalid le %q", f.Name, s.Labels["le"])
			}
			if n := len(x.les); n > 0 && le <= x.les[n-1] {
				return fmt.Errorf("histogram %s: le %q does not follow %v in ascending order", f.Name, s.Labels["le"], x.les[n-1])
			}
			if n := len(x.counts); n > 0 && s.Value < x.counts[n-1] {
				return fmt.Errorf("histogram %s: bucket le=%q holds %v, fewer than the bucket before it (%v)", f.Name, s.Labels["le"], s.Value, x.counts[n-1])
			}
			x.les = append(x.les, le)
			x.counts = append(x.counts, s.Value)
		case strings.HasSuffix(s.Name, "_count"):
			v := s.Value
			x.count = &v
		case strings.HasSuffix(s.Name, "_sum"):
			x.sum = true
		}
	}
	for key, x := range all {
		n := len(x.les)
		switch {
		case n == 0 || !math.IsInf(x.les[n-1], 1):
			return fmt.Errorf("histogram %s%s has no le=\"+Inf\" bucket", f.Name, key)
		case x.count == nil:
			return fmt.Errorf("histogram %s%s has no _count", f.Name, key)
		case *x.count != x.counts[n-1]:
			return fmt.Errorf("histogram %s%s: the +Inf bucket holds %v, and _count is %v", f.Name, key, x.counts[n-1], *x.count)
		case !x.sum:
			return fmt.Errorf("histogram %s%s has no _sum", f.Name, key)
		}
	}
	return nil
}

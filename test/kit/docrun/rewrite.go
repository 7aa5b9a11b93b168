package docrun

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Pages are written for a real host. The runner does not touch the real
// /etc or the network: it rewrites each block before running it, and each
// output back before comparing it.
//
//   - Host paths (hostPaths) move under the scratch root: /etc/vcon-server
//     is $ROOT/etc/vcon-server. In outputs, $ROOT is removed again.
//   - vcon.example.com:8443 is the server the page runs, on a free port of
//     loopback; objects.example.com:9000 is the S3 service the runner
//     started. Both become localhost:<port>, which the server's own Go
//     client, curl, DuckDB and the certificates (made for "localhost" once
//     rewritten) all agree on. Outputs get the page's names back.
//
// The rewriting is plain text, so it reaches heredocs, TOML files and SQL
// alike, and every tool sees the same names.

// hostPaths are the host folders a page may write to. A path is rewritten
// only where it starts (not inside a URL or another path).
var hostPaths = regexp.MustCompile(`(^|[^A-Za-z0-9_./:-])(/etc/vcon-server|/etc/systemd/system|/var/lib/vcon-[a-z-]+|/var/backups/vcon-[a-z-]+|/var/log/vcon-server|/usr/local/share/vcon-server|/usr/local/bin)\b`)

// Rewriter maps a page's host names, ports and paths to the scratch
// environment and back.
type Rewriter struct {
	Root   string // scratch root, no trailing slash
	Port   int    // the server's port (the page's 8443)
	S3Port int    // the S3 service's port (the page's 9000), 0 for none
	// KMSPort is the key service's port (the page's kms.example.com:4443),
	// 0 for none.
	KMSPort int
}

// Block rewrites a block's text for running.
func (r *Rewriter) Block(s string) string {
	port := strconv.Itoa(r.Port)
	pairs := []string{}
	if r.S3Port != 0 {
		pairs = append(pairs, "objects.example.com:9000", "localhost:"+strconv.Itoa(r.S3Port))
	}
	if r.KMSPort != 0 {
		pairs = append(pairs, "kms.example.com:4443", "localhost:"+strconv.Itoa(r.KMSPort))
	}
	pairs = append(pairs,
		"vcon.example.com:8443", "localhost:"+port,
		":8443", ":"+port,
		"objects.example.com", "localhost",
		"vcon.example.com", "localhost",
	)
	s = strings.NewReplacer(pairs...).Replace(s)
	return hostPaths.ReplaceAllString(s, "${1}"+r.Root+"${2}")
}

// Output rewrites what a block printed back to the page's names.
func (r *Rewriter) Output(s string) string {
	port := strconv.Itoa(r.Port)
	pairs := []string{}
	if r.S3Port != 0 {
		s3 := strconv.Itoa(r.S3Port)
		pairs = append(pairs, "localhost:"+s3, "objects.example.com:9000", "127.0.0.1:"+s3, "objects.example.com:9000")
	}
	if r.KMSPort != 0 {
		k := strconv.Itoa(r.KMSPort)
		pairs = append(pairs, "localhost:"+k, "kms.example.com:4443", "127.0.0.1:"+k, "kms.example.com:4443")
	}
	pairs = append(pairs,
		r.Root+"/", "/",
		"localhost:"+port, "vcon.example.com:8443",
		":"+port, ":8443",
	)
	// Longest first, so the root goes before any shorter match in it.
	type pair struct{ from, to string }
	var ps []pair
	for i := 0; i < len(pairs); i += 2 {
		ps = append(ps, pair{pairs[i], pairs[i+1]})
	}
	sort.SliceStable(ps, func(i, j int) bool { return len(ps[i].from) > len(ps[j].from) })
	pairs = pairs[:0]
	for _, p := range ps {
		pairs = append(pairs, p.from, p.to)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

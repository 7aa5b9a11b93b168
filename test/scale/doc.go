// Package scale holds the scale benchmark of issue 20, "Costs that stay
// linear": `make scale` builds catalogs of 10,000, 100,000 and 1,000,000
// versions and prints, per size, the time per version and the peak RSS of
// check, check --deep, export parquet, the purge sweep, the listing,
// master-key rotate and serve's start-up, each run as the real binary. It
// never runs in `make test`: TestScale skips unless VCON_SCALE=1. It has no
// code of its own.
package scale

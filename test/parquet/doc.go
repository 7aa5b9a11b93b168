// Package parquet holds the end-to-end tests of Parquet storage
// (docs/parquet-storage.md): the documented scenario against a real server
// on versitygw and MinIO with DuckDB reading the files, kills of the real
// binary at every step of a pack run, a merge and a purge rewrite, and the
// benchmarks of packing and of ranged reads. It has no code of its own.
package parquet

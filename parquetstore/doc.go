// Package parquetstore writes and reads the Apache Parquet files of
// vcon-server: pack files, which hold sealed objects in a bucket (one row per
// packed version), and export files, which carry a tenant's versions with the
// clear columns of its metadata level for analytics tools.
//
// Both are plain Parquet that DuckDB, Athena and Spark read: data pages of
// version 2, uncompressed, without dictionary pages, version and uuid columns
// as FIXED_LEN_BYTE_ARRAY(16) with the UUID logical type, times as INT64
// with the logical type TIMESTAMP(NANOS, UTC). docs/FORMAT.md describes the
// files; the documentation pages on Parquet storage and Parquet export show
// what DuckDB reads from them.
//
// A pack file is written so that a packed version can be fetched with one
// ranged read of exactly its sealed bytes: the writer reports, and
// ReadLocations recomputes from the file alone, the byte range of every
// row's sealed value.
//
// Writers hold at most one row group in memory and flush it once its sealed
// bytes pass a bound, so a file of any size is written with bounded memory.
package parquetstore

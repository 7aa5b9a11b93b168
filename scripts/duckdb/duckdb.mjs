#!/usr/bin/env node
// A stand-in for the DuckDB command-line program, for vcon-server's tests and
// documentation runner, built on the DuckDB library itself (@duckdb/node-api).
//
// The documentation shows what the real CLI prints, so this program prints
// the same bytes for what the documentation uses:
//
//   duckdb -csv -c "SQL; SQL; ..."   run each statement in order in one
//                                    in-memory database; print each result
//   duckdb --version                 v<library version> <words>
//
// Rendering follows the real CLI's -csv mode (tools/shell in DuckDB 1.5):
//   - only statements that return a query result print anything (SELECT,
//     DESCRIBE, CREATE SECRET's one-row "Success" table); SET VARIABLE,
//     INSTALL, LOAD, CREATE TABLE and INSERT print nothing;
//   - a header line of column names, then one line per row, "\n" endings;
//   - every value is cast to VARCHAR by DuckDB in the connection's context
//     (as the CLI does), so UUID, DATE, TIMESTAMP WITH TIME ZONE (in the
//     TimeZone setting), BOOLEAN, BLOB, lists and structs read exactly as
//     DuckDB writes them;
//   - NULL prints as the empty string;
//   - a field is put in double quotes, with inner double quotes doubled, when
//     it holds the separator, a control character, a double or single quote,
//     or any byte from 127 up;
//   - the first failing statement prints its error on standard error and the
//     program exits 1.
//
// Statements are split by DuckDB's own parser (extractStatements), never by
// looking for ';', and each one is bound only after the one before has run,
// so LOAD and SET VARIABLE take effect for the statements that follow.

import { readFileSync } from 'node:fs';
import { DuckDBInstance, LIST, listValue } from '@duckdb/node-api';
import duckdb from '@duckdb/node-bindings';

const usage = `usage: duckdb [OPTIONS] [FILENAME]
A DuckDB command-line stand-in for vcon-server's tests (scripts/duckdb/duckdb.mjs).
Options:
  -csv            render results as CSV (the only output mode supported)
  -c SQL          run SQL (one or more statements) and exit
  -header         show column names (the default)
  -noheader       do not show column names
  -bail           stop at the first error (always the case here)
  -version, --version
                  print the DuckDB version and exit
Without -c, the SQL is read from standard input.
`;

const RESULT_QUERY = 3; // duckdb_result_type DUCKDB_RESULT_TYPE_QUERY_RESULT
const TYPE_VARCHAR = 17; // duckdb_type DUCKDB_TYPE_VARCHAR

function fail(message) {
  process.stderr.write(message.endsWith('\n') ? message : message + '\n');
  process.exit(1);
}

function parseArgs(argv) {
  const opts = { mode: null, header: true, sql: null, file: ':memory:' };
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    if (a.startsWith('--') && a.length > 2) {
      a = a.slice(1); // the CLI takes -x and --x alike
    }
    switch (a) {
      case '-version':
        opts.version = true;
        break;
      case '-help':
        process.stdout.write(usage);
        process.exit(0);
        break;
      case '-csv':
        opts.mode = 'csv';
        break;
      case '-header':
        opts.header = true;
        break;
      case '-noheader':
        opts.header = false;
        break;
      case '-bail':
      case '-batch':
      case '-no-stdin':
        break;
      case '-c':
      case '-s':
        if (i + 1 >= argv.length) {
          fail(`Error: missing argument to ${argv[i]}`);
        }
        opts.sql = argv[++i];
        break;
      default:
        if (a.startsWith('-')) {
          fail(`Error: unknown option: ${argv[i]}\n${usage}`);
        }
        if (opts.file !== ':memory:') {
          fail(`Error: this stand-in takes one database file, got ${argv[i]} too`);
        }
        opts.file = a;
    }
  }
  return opts;
}

// needsQuote mirrors the CLI's CSV renderer (CharacterNeedsQuote plus the
// separator test); the test is on UTF-8 bytes there, and every character
// outside ASCII has a byte from 128 up, so testing UTF-16 units is the same.
function needsQuote(s, sep) {
  if (s.includes(sep)) {
    return true;
  }
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c <= 31 || c >= 127 || c === 34 /* " */ || c === 39 /* ' */) {
      return true;
    }
  }
  return false;
}

function csvField(s, sep) {
  if (s === null) {
    return ''; // the CLI's null value, empty unless .nullvalue sets one
  }
  return needsQuote(s, sep) ? '"' + s.replaceAll('"', '""') + '"' : s;
}

// varcharColumn casts one result column to text with DuckDB's own cast, in
// this connection's context (TimeZone and all), as the CLI does: the values
// go back in as one LIST parameter of the column's type.
async function varcharColumn(connection, type, values) {
  if (type.typeId === TYPE_VARCHAR) {
    return values.map((v) => (v === null ? null : String(v)));
  }
  try {
    const result = await connection.run(
      'SELECT list_transform($1, x -> CAST(x AS VARCHAR)) AS s',
      [listValue(values)],
      [LIST(type)],
    );
    const rows = await result.getRows();
    const items = rows[0][0].items;
    return items.map((v) => (v === null ? null : String(v)));
  } catch {
    // A type the binding cannot send back (none the documentation uses):
    // fall back to the library's own rendering of the value.
    return values.map((v) => (v === null ? null : String(v)));
  }
}

async function render(connection, result, opts, out) {
  const sep = ',';
  const names = result.columnNames();
  const types = result.columnTypes();
  if (opts.header) {
    out.push(names.map((n) => csvField(n, sep)).join(sep) + '\n');
  }
  const columns = await result.getColumns();
  if (columns.length === 0 || columns[0].length === 0) {
    return;
  }
  const text = [];
  for (let c = 0; c < columns.length; c++) {
    text.push(await varcharColumn(connection, types[c], columns[c]));
  }
  for (let r = 0; r < text[0].length; r++) {
    const fields = [];
    for (let c = 0; c < text.length; c++) {
      fields.push(csvField(text[c][r], sep));
    }
    out.push(fields.join(sep) + '\n');
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.version) {
    const pkg = JSON.parse(
      readFileSync(new URL('./node_modules/@duckdb/node-api/package.json', import.meta.url), 'utf8'),
    );
    process.stdout.write(`${duckdb.library_version()} (vcon-server stand-in, @duckdb/node-api ${pkg.version})\n`);
    return;
  }
  if (opts.mode !== 'csv') {
    fail('Error: this DuckDB stand-in renders only -csv output; pass -csv');
  }
  let sql = opts.sql;
  if (sql === null) {
    sql = readFileSync(0, 'utf8');
  }
  const instance = await DuckDBInstance.create(opts.file);
  const connection = await instance.connect();
  let extracted;
  try {
    extracted = await connection.extractStatements(sql);
  } catch (err) {
    fail(err.message);
  }
  for (let i = 0; i < extracted.count; i++) {
    const out = [];
    try {
      const prepared = await extracted.prepare(i);
      const result = await prepared.run();
      if (result.returnType === RESULT_QUERY) {
        await render(connection, result, opts, out);
      }
    } catch (err) {
      fail(err.message);
    }
    // Each statement's output is written before the next one runs, so what
    // came before an error is on standard output, as with the real CLI.
    process.stdout.write(out.join(''));
  }
}

main().catch((err) => fail(err && err.message ? err.message : String(err)));

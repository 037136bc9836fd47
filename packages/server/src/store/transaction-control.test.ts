import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { endsTransaction, LEXINGS, readingsOf, type SqlFlavor, statementsOf } from './transaction-control.js';

const FLAVORS: SqlFlavor[] = ['postgres', 'mysql', 'sqlite'];
/** The texts `endsTransaction` lets through (for lists that must all be refused). */
const passed = (texts: string[], flavor: SqlFlavor) => texts.filter((text) => !endsTransaction(text, flavor));
/** The texts `endsTransaction` refuses (for lists that must all pass). */
const refused = (texts: string[], flavor: SqlFlavor) => texts.filter((text) => endsTransaction(text, flavor));

describe('endsTransaction', () => {
  it.each(FLAVORS)('refuses what ends the transaction on %s, wherever the statement starts', (flavor) => {
    const texts = [
      'COMMIT',
      'commit work',
      '  END',
      'ROLLBACK',
      'rollback and chain',
      'BEGIN',
      'START TRANSACTION',
      'ABORT',
      "PREPARE TRANSACTION 'x'",
      'SET autocommit = 1',
      'SELECT 1; COMMIT',
      'SELECT 1;COMMIT;',
      '/* c */ COMMIT',
      '-- c\nCOMMIT',
      "SELECT 'a''b'; COMMIT",
      'SELECT "a;b"; COMMIT',
      "SELECT 'it''s'; /* ' */ COMMIT",
    ];
    expect(passed(texts, flavor)).toEqual([]);
  });

  it.each(FLAVORS)('lets through on %s what only mentions it, and the handler own savepoints', (flavor) => {
    const texts = [
      'SELECT 1',
      "INSERT INTO notes (body) VALUES ('paid; commit later')",
      'SELECT "end" FROM t',
      "SELECT 'COMMIT; END' AS x",
      'SELECT 1 -- ; COMMIT',
      'SELECT 1 /* ; COMMIT */',
      'SAVEPOINT mine',
      'ROLLBACK TO SAVEPOINT mine',
      'rollback work to mine',
      'RELEASE SAVEPOINT mine',
      'UPDATE accounts SET balance = balance - 1 WHERE id = 1; SELECT 1',
      'SELECT pending, started FROM jobs',
    ];
    expect(refused(texts, flavor)).toEqual([]);
  });

  it('reads Postgres texts by Postgres rules', () => {
    const ends = [
      // A backslash in a standard string is a character: the string ends before `;`.
      "SELECT '\\'; COMMIT; -- '",
      // Block comments nest: the first `*/` does not end this one.
      '/* /* */ */ COMMIT',
      // `$` continues a name, so `x$$` opens no dollar quote.
      'SELECT 1 AS x$$; COMMIT; SELECT 2 AS y$$',
      // A name ending in E before a quote is a name, not an escape string.
      "SELECT 1 AS namE'\\'; COMMIT; -- '",
      // A carriage return ends a `--` comment.
      '--\rCOMMIT',
      'SELECT 1; -- x\rEND',
      // With standard_conforming_strings off a backslash escapes (on, this is one string): read both ways.
      "SELECT 'a\\'' ; COMMIT; --'",
      // A string continued on the next line keeps its kind: the continuation of an E'…' takes backslash escapes
      // (outside review, third round).
      "SELECT E''\n'\\'' || '\\'; COMMIT; SELECT 1",
      "SELECT e'' -- note\n  -- more\n'\\'' || '\\'; COMMIT; SELECT 1",
      "SELECT E'a'\r\n\t'\\'' || '\\'; ROLLBACK; SELECT 1",
      // Session transaction characteristics outlive a committed call on its pooled connection, where this
      // middleware's next claims would run read-only (fifth review, as on MySQL).
      'SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY',
      'set default_transaction_read_only = on',
      'SET SESSION default_transaction_isolation TO "read uncommitted"',
      'SET default_transaction_deferrable = on',
    ];
    expect(passed(ends, 'postgres')).toEqual([]);
    const allowed = [
      "SELECT E'\\'; COMMIT; '",
      // No newline between them: not one string, and the second is standard, with no escapes.
      "SELECT E'' '\\'; SELECT 1 ; SELECT E'\\''",
      'SELECT $$; COMMIT;$$',
      'SELECT $body$ ; COMMIT $x$ ; $body$',
      'DO $$ BEGIN PERFORM 1; END $$',
      'SELECT 1 /* a /* b */ ; COMMIT */',
      'SELECT $1::int; SELECT $2::int',
      'SELECT a[1]; SELECT b[2]',
      'SELECT 1 # 2',
      // Postgres refuses a COMMIT inside a procedure or prepared statement called in a transaction block.
      'CALL p()',
      'PREPARE q AS SELECT 1',
      'EXECUTE q',
      'SET LOCAL statement_timeout = 1000',
      'SET LOCAL default_transaction_read_only = on',
      "SET application_name = 'transaction'",
    ];
    expect(refused(allowed, 'postgres')).toEqual([]);
  });

  it('reads MySQL texts by MySQL rules', () => {
    const ends = [
      // The inside of an executable comment runs.
      '/*! COMMIT */',
      '/*!50000 COMMIT */',
      '/*M! COMMIT */',
      'SELECT 1; /*!40101 SET autocommit = 1 */',
      // `#` ends at the line, and its quote opens no string.
      "# it's done\nCOMMIT",
      // `--` is a comment only before a space: here it is two minus signs.
      'SELECT 1 --1; COMMIT',
      // With NO_BACKSLASH_ESCAPES a backslash is a character: read both ways.
      "SELECT 'a\\'; COMMIT; -- '",
      // DEL after `--` opens a comment on some servers: read both ways.
      "select 1 --\x7f'\n; commit; -- '",
      // Whether a carriage return ends a `#` comment: read both ways.
      "# x\r'\nCOMMIT; -- '",
      '# x\rCOMMIT',
      // Statements that run another, or SQL that cannot be read before it runs (a procedure may COMMIT).
      'SET STATEMENT max_statement_time=100 FOR COMMIT',
      "EXECUTE IMMEDIATE 'COMMIT'",
      "PREPARE s FROM 'COMMIT'",
      'EXECUTE s',
      'CALL rv_commit_proc()',
      // What changes how the session commits, in any form.
      'SET LOCAL autocommit = 1',
      'SET @rv = 1, autocommit = 1',
      'SET @@session.`autocommit` = 1',
      'SET SESSION completion_type = 1',
      'SET STATEMENT max_statement_time=100 FOR SET autocommit = 1',
      // Implicit commits.
      'CHECK TABLE t',
      'RESET QUERY CACHE',
      "SET PASSWORD FOR nobody = PASSWORD('x')",
      'XA START 1',
      'CREATE TABLE t (id int)',
      'DROP TABLE t',
      'LOCK TABLES t WRITE',
      'TRUNCATE t',
      // A version-gated comment runs only on a server at least that version: read both ways (outside review, third
      // round), each comment on its own.
      '/*!99999 SELECT */ COMMIT',
      '/*M!999999 SELECT */ COMMIT',
      '/*!99999 SELECT 1, */ ROLLBACK',
      'CREATE /*!99999 TEMPORARY*/ TABLE t (id int)',
      'DROP /*!99999 TEMPORARY*/ TABLE IF EXISTS t',
      'SELECT 1 /*!40000 , 2 */; /*!99999 SELECT */ COMMIT',
      // Compound statements run statements of their own; REPEAT's last part starts with UNTIL, not END.
      'REPEAT COMMIT; UNTIL 1 END REPEAT',
      'REPEAT SET autocommit=0; UNTIL 1 END REPEAT',
      'r: REPEAT SELECT 1; UNTIL 1 END REPEAT r',
      '`r`: REPEAT SELECT 1; UNTIL 1 END REPEAT',
      // ANSI_QUOTES: "…" is a name, where a backslash is a character, while '…' still takes escapes.
      'SELECT 1 AS "\\", \'\\\' \'; COMMIT; SELECT 1 AS "\'"',

      // Fourth round: what commits that no list named. Only statements known not to commit pass now.
      'SET DEFAULT ROLE NONE',
      'set default role r1 for current_user',
      'CREATE TEMPORARY SEQUENCE s',
      'CREATE OR REPLACE TEMPORARY SEQUENCE s',
      'create temporary sequence if not exists s',
      'SHUTDOWN',
      'RESTART',
      "CLONE LOCAL DATA DIRECTORY = '/tmp/x'",
      "IMPORT TABLE FROM '/tmp/t.sdi'",
      'PURGE BINARY LOGS BEFORE NOW()',
      'SELECT 1; SHUTDOWN',
      'ALTER TABLE tmp ADD COLUMN y int',
      'CREATE TEMPORARY TABLE t SELECT 1; CREATE TEMPORARY SEQUENCE s',
      // Fifth round: a temporary table that is a sequence commits too (a copy of one, or one declared so).
      'CREATE TEMPORARY TABLE t LIKE s',
      'CREATE TEMPORARY TABLE IF NOT EXISTS t LIKE u',
      'create or replace temporary table t (like s)',
      'CREATE TEMPORARY TABLE t (n bigint) SEQUENCE=1',
      'SET STATEMENT max_statement_time=10 FOR CREATE TEMPORARY TABLE t LIKE s',
      '/*!CREATE TEMPORARY TABLE t LIKE s*/',
      // Session state that outlives the call on a pooled connection and changes how this middleware's own statements
      // run there: another default database (its unqualified table), read-only or weaker transactions.
      'USE other',
      'SET SESSION TRANSACTION READ ONLY',
      'set global transaction isolation level read uncommitted',
      'SET @@session.transaction_read_only = 1',
      'SET SESSION tx_isolation = "READ-UNCOMMITTED"',
    ];
    expect(passed(ends, 'mysql')).toEqual([]);
    const allowed = [
      'SELECT `a;COMMIT`',
      'SELECT 1 # ; COMMIT',
      'SELECT 1 /*+ ; COMMIT */',
      'CREATE TEMPORARY TABLE t (id int)',
      'DROP TEMPORARY TABLE t',
      'SET STATEMENT max_statement_time=100 FOR SELECT 1',
      'SET @x = 1',
      'SET NAMES utf8mb4',
      'SELECT 1 --x',
      'CHECKSUM TABLE t',
      'SELECT /*!99999 1, */ 2',
      'CREATE /*!40000 TEMPORARY */ /*!99999 TEMPORARY */ TEMPORARY TABLE t (id int)',

      // What a handler sends that does not commit (each checked on MariaDB 10.11: a row inserted before it is rolled
      // back after it).
      "INSERT INTO t (note) VALUES ('a'); UPDATE t SET note = 'b'; DELETE FROM t WHERE id = 1",
      'REPLACE INTO t VALUES (1)',
      'WITH x AS (SELECT 1) SELECT * FROM x',
      '(SELECT 1) UNION (SELECT 2)',
      'VALUES (1), (2)',
      'TABLE t',
      'DO 1',
      'SELECT 1 INTO @x',
      'SHOW WARNINGS',
      'EXPLAIN SELECT 1',
      'ANALYZE SELECT 1',
      'DESCRIBE t',
      'DESC t',
      "HELP 'x'",
      'CREATE OR REPLACE TEMPORARY TABLE t (id int)',
      'CREATE TEMPORARY TABLE IF NOT EXISTS t SELECT * FROM s',
      'DROP TEMPORARY TABLE IF EXISTS t',
      'DROP TEMPORARY SEQUENCE IF EXISTS s',
      'SAVEPOINT a',
      'ROLLBACK TO SAVEPOINT a',
      'ROLLBACK WORK TO a',
      'RELEASE SAVEPOINT a',
      'SET ROLE NONE',
      'SET CHARACTER SET utf8mb4',
      "SIGNAL SQLSTATE '45000'",
      'GET DIAGNOSTICS @n = NUMBER',
      'HANDLER t OPEN',
      "LOAD DATA LOCAL INFILE '/tmp/x' INTO TABLE t",
      'KILL QUERY 5',
      'DEALLOCATE PREPARE p',
      '',
      'SELECT 1;',
      ' ; SELECT 1',
    ];
    expect(refused(allowed, 'mysql')).toEqual([]);
  });

  it('reads SQLite texts by SQLite rules', () => {
    expect(endsTransaction("SELECT 'a\\'; COMMIT; -- '", 'sqlite')).toBe(true);
    expect(endsTransaction('SELECT `a;COMMIT`', 'sqlite')).toBe(false);
    expect(endsTransaction('CREATE TABLE t (id int)', 'sqlite')).toBe(false);
  });

  /** Texts made of the characters each reading treats differently, so that any two readings can disagree. */
  const lexedTexts = fc
    .array(
      fc.constantFrom(
        "'",
        '"',
        '`',
        ';',
        '-',
        '--',
        '#',
        '/*',
        '*/',
        '/*!',
        '$$',
        'E',
        '\\',
        '\r',
        '\n',
        '\x7f',
        'é',
        ' ',
        'COMMIT',
        'x',
      ),
      { maxLength: 24 },
    )
    .map((parts) => parts.join(''));

  it.each(FLAVORS)('reads a %s text only the ways that differ on it, and every way that does', (flavor) => {
    fc.assert(
      fc.property(lexedTexts, (text) => {
        const distinct = (rules: readonly (typeof LEXINGS)[SqlFlavor][number][]) =>
          new Set(rules.map((r) => statementsOf(text, r).join(';')));
        // The readings skipped would have found the same statements as one kept.
        expect(distinct(readingsOf(text, flavor))).toEqual(distinct(LEXINGS[flavor]));
      }),
      { numRuns: 3000 },
    );
  });

  it('reads a MySQL text without backslash, carriage return or DEL-and-up characters once', () => {
    expect(readingsOf('SELECT 1; -- x\nSELECT 2', 'mysql')).toHaveLength(1);
    expect(readingsOf("SELECT 'a\\'; -- x\r\x7f", 'mysql')).toHaveLength(8);
    expect(readingsOf("SELECT E'a\\'", 'postgres')).toHaveLength(2);
  });
});

/** Whose rules a text is read by: which quotes, comments and escapes the database knows. */
export type SqlFlavor = 'postgres' | 'mysql' | 'sqlite';

/**
 * The handler sent a statement that would end the call's transaction: its writes would commit (or vanish) apart from
 * the stored result, and the key's claim with them. Refused before it reaches the database.
 */
export class TransactionControlError extends Error {
  constructor(text: string) {
    super(
      `ctx.idempotency.db cannot end the call's transaction (refused: ${JSON.stringify(text.slice(0, 80))}): the middleware commits the handler's writes together with their stored result`,
    );
  }
}

/**
 * Whether a text holds a statement that ends the transaction it runs in, or opens another: BEGIN, START TRANSACTION,
 * COMMIT, END, ABORT, ROLLBACK (but not ROLLBACK TO a savepoint: the handler's own savepoints are its business),
 * PREPARE TRANSACTION, `SET autocommit`, and a session's transaction characteristics (Postgres' `SET SESSION
 * CHARACTERISTICS`, `SET default_transaction_…`; on MySQL see below), which outlive the call on a pooled connection.
 *
 * On MySQL, where far more statements commit implicitly than any list keeps up with (DDL, LOCK TABLES, grants, table
 * maintenance, SET DEFAULT ROLE, a temporary sequence, replication, XA, SHUTDOWN…), only statements known not to
 * commit pass (see MYSQL_KEEPS; a temporary table made `LIKE` another, which may be a sequence, or declared
 * `SEQUENCE=1`, commits and is refused), and not `USE` (the connection's default database, where this middleware's
 * unqualified table is found, outlives the call). SET passes unless it is SET PASSWORD, SET DEFAULT ROLE or names
 * `autocommit`, `completion_type`, `transaction` or a `tx_` variable in whatever form; `SET STATEMENT … FOR` is judged
 * by the statement it runs. What runs SQL that cannot be read before it runs (CALL, PREPARE, EXECUTE, compound
 * statements) is refused with the rest.
 *
 * Statements are found the way the database finds them, so that a `;` or a keyword inside a string, a quoted name or
 * a comment does not count, and one the database runs is never hidden: Postgres nests block comments, lets `$`
 * continue a name, ends `--` comments at a carriage return too, and reads a backslash in a standard string as a
 * character; MySQL runs the inside of `/*! … *\/` and ends `#` comments at the line. Where a setting or a server
 * version changes the rules (`standard_conforming_strings`, `NO_BACKSLASH_ESCAPES`, which characters after `--` open
 * a comment, whether a carriage return ends one), the text is read every way and refused if any finds one.
 */
export function endsTransaction(text: string, flavor: SqlFlavor): boolean {
  const ends = (statement: string) => endsStatement(statement, flavor, text);
  // One statement with nothing to lex (what Kysely compiles): only its first words count.
  if (!NEEDS_LEXING.test(text)) return ends(text);
  const readings = readingsOf(text, flavor);
  const gated = flavor === 'mysql' ? (text.match(VERSION_GATED)?.length ?? 0) : 0;
  if (gated === 0) return readings.some((rules) => statementsOf(text, rules).some(ends));
  // Each version-gated comment runs or not by the server's version: every combination is read. Beyond a few such
  // comments (mysqldump's texts, not a handler's) the text is refused rather than read 2^n ways.
  if (gated > MAX_GATED) return true;
  return readings.some((rules) =>
    Array.from({ length: 2 ** gated }, (_, skipped) => statementsOf(text, { ...rules, skipped })).some((statements) =>
      statements.some(ends),
    ),
  );
}

/** MySQL's and MariaDB's version-gated comments: `/*!50000 … *\/`, `/*M!100100 … *\/`. */
const VERSION_GATED = /\/\*M?!\d/g;
const MAX_GATED = 6;

/**
 * The flavor's readings that can differ on this text: a rule about backslashes, carriage returns or characters from
 * DEL up reads a text without such a character as the rule's absence does, so one of each such pair is enough. On
 * MySQL a plain text is read once instead of 8 times.
 */
export function readingsOf(text: string, flavor: SqlFlavor): readonly Rules[] {
  const mask =
    (text.includes('\\') ? BACKSLASH : 0) |
    (text.includes('"') ? DOUBLE_QUOTE : 0) |
    (text.includes('\r') ? CARRIAGE_RETURN : 0) |
    (FROM_DEL.test(text) ? DEL_AND_UP : 0);
  return READINGS[flavor][mask]!;
}

export function endsStatement(statement: string, flavor: SqlFlavor, text: string): boolean {
  if (ENDS.test(statement)) return true;
  // A session's transaction characteristics outlive a committed call on its pooled connection, where this
  // middleware's next claims would run read-only or at another isolation (`SET LOCAL` ends with the call: allowed).
  if (flavor === 'postgres') return PG_SESSION_CHARACTERISTICS.test(statement);
  if (flavor !== 'mysql') return false;
  // `SET STATEMENT var = value, … FOR statement` runs that statement.
  const inner = /^\s*set\s+statement\b[\s\S]*?\bfor\b([\s\S]*)$/i.exec(statement);
  if (inner) return endsStatement(inner[1]!, flavor, text);
  // `SET LOCAL autocommit`, `SET @x = 1, autocommit = 1`, `` SET @@session.`autocommit` ``: the name is read in the
  // whole text, where quoting has not hidden it. Transaction characteristics (read only, isolation) are refused with
  // what commits: they outlive the call on its pooled connection, where this middleware's next claims would run.
  if (/^\s*set\b/i.test(statement)) {
    return SET_COMMITS.test(statement) || /autocommit|completion_type|\btransaction|\btx_/i.test(text);
  }
  if (!MYSQL_KEEPS.test(statement)) return true;
  // A temporary table that is a sequence commits like one: a copy (`LIKE s`, where s may be a sequence) or one
  // declared `SEQUENCE=1`. A `LIKE` anywhere in the statement is refused with them (a CREATE … SELECT filtering with
  // LIKE too: refusing it is the cost of never letting the copy of a sequence through).
  return /^\s*create\b/i.test(statement) && /\b(?:like|sequence)\b/i.test(statement);
}

const PG_SESSION_CHARACTERISTICS = /^\s*set\s+(?:session\s+)?(?:characteristics\b|"?default_transaction_)/i;
export const NEEDS_LEXING = /[;#]|\/\*|--/;
const ENDS =
  /^\s*(?:begin|start|commit|end|abort|rollback(?!\s+(?:work\s+|transaction\s+)?to\b)|prepare\s+transaction|set\s+(?:@@(?:session\.)?|session\s+)?autocommit)\b/i;
/**
 * MySQL and MariaDB statements that do not commit, each checked on MariaDB 10.11 (a row written before it is rolled
 * back after it): queries and DML, temporary tables (not temporary sequences, nor a temporary table that is one:
 * see endsStatement), savepoints, and what only reads or signals. An empty statement (after the last `;`, or only
 * comments) is nothing.
 */
const MYSQL_KEEPS =
  /^\s*(?:$|\(|(?:select|insert|update|delete|replace|with|values|table|do|show|explain|describe|desc|help|checksum|savepoint|release|handler|kill|deallocate|signal|resignal|get\s+(?:current\s+|stacked\s+)?diagnostics|load\s+(?:data|xml)|analyze\s+(?:format|select|insert|update|delete|replace|with)|rollback\s+(?:work\s+)?to|create\s+(?:or\s+replace\s+)?(?:temporary\s+)+table|drop\s+temporary\s+(?:table|sequence))\b)/i;
const SET_COMMITS = /^\s*set\s+(?:password|default\s+role)\b/i;

export interface Rules {
  /** A backslash escapes the next character in every string (else only in Postgres' `E'…'`). */
  backslash: boolean;
  /** A carriage return ends a `--` or `#` comment, as a line feed does. */
  returnEndsLine: boolean;
  /** MySQL: `--` before DEL or a non-ASCII character opens a comment (it always does before a space or a control). */
  looseDash?: boolean;
  /** MySQL's ANSI_QUOTES: `"…"` is a name, where a backslash is a character even while strings take escapes. */
  ansiQuotes?: boolean;
  /** MySQL: bit n set skips the n-th version-gated comment (a server older than its version), else its inside runs. */
  skipped?: number;
  postgres?: boolean;
  mysql?: boolean;
}

export const LEXINGS: Record<SqlFlavor, readonly Rules[]> = {
  postgres: [
    { backslash: false, returnEndsLine: true, postgres: true },
    { backslash: true, returnEndsLine: true, postgres: true },
  ],
  mysql: [true, false].flatMap((backslash) =>
    [true, false].flatMap((returnEndsLine) =>
      [true, false].flatMap((looseDash) =>
        [false, true].map((ansiQuotes) => ({ backslash, returnEndsLine, looseDash, ansiQuotes, mysql: true })),
      ),
    ),
  ),
  sqlite: [{ backslash: false, returnEndsLine: false }],
};

/** Which of the characters that some reading treats apart a text holds: bits of `readingsOf`'s mask. */
const BACKSLASH = 1;
const CARRIAGE_RETURN = 2;
const DEL_AND_UP = 4;
const DOUBLE_QUOTE = 8;
const FROM_DEL = /[^\0-\x7e]/;

/** For each flavor and mask, the flavor's readings with those that read such a text alike dropped (one kept). */
const READINGS: Record<SqlFlavor, readonly (readonly Rules[])[]> = {
  postgres: byMask(LEXINGS.postgres),
  mysql: byMask(LEXINGS.mysql),
  sqlite: byMask(LEXINGS.sqlite),
};

function byMask(all: readonly Rules[]): (readonly Rules[])[] {
  return Array.from({ length: 16 }, (_, mask) => {
    const seen = new Set<string>();
    return all.filter((rules) => {
      // ANSI_QUOTES reads a text apart only where it holds a double quote and backslashes escape in strings.
      const ansi =
        (mask & DOUBLE_QUOTE) !== 0 && (mask & BACKSLASH) !== 0 && rules.backslash && rules.ansiQuotes === true;
      const reading = `${(mask & BACKSLASH) !== 0 && rules.backslash} ${(mask & CARRIAGE_RETURN) !== 0 && rules.returnEndsLine} ${(mask & DEL_AND_UP) !== 0 && rules.looseDash === true} ${ansi}`;
      if (seen.has(reading)) return false;
      seen.add(reading);
      return true;
    });
  });
}

/** The statements of a text, with strings, quoted names and comments blanked out. */
export function statementsOf(text: string, rules: Rules): string[] {
  let out = '';
  let from = 0; // start of the code not yet copied to `out`
  let executable = false; // inside MySQL's `/*! … */`, whose content runs
  let gated = 0; // version-gated comments met so far
  let i = 0;
  const skip = (to: number) => {
    out += `${text.slice(from, i)} `;
    i = to;
    from = to;
  };
  while (i < text.length) {
    const c = text[i];
    const next = text[i + 1];
    if (c === "'") {
      const escapes = rules.backslash || (rules.postgres === true && isEscapePrefix(text, i));
      let end = quoteEnd(text, i, "'", escapes);
      // Postgres: a string continued after a newline (`E'a'` newline `'b'`) is one string of the first one's kind.
      for (let next = continuation(text, end, rules); next >= 0; next = continuation(text, end, rules)) {
        end = quoteEnd(text, next, "'", escapes);
      }
      skip(end);
    } else if (c === '"') {
      skip(quoteEnd(text, i, '"', rules.mysql === true && rules.backslash && rules.ansiQuotes !== true));
    } else if (c === '`' && !rules.postgres) {
      skip(quoteEnd(text, i, '`', false));
    } else if (c === '-' && next === '-' && (!rules.mysql || dashOpensComment(text.charCodeAt(i + 2), rules))) {
      skip(lineEnd(text, i, rules));
    } else if (c === '#' && rules.mysql) {
      skip(lineEnd(text, i, rules));
    } else if (c === '/' && next === '*') {
      const marker = rules.mysql ? /^\/\*M?!(\d*)/.exec(text.slice(i, i + 12)) : null;
      if (marker?.[1] && ((rules.skipped ?? 0) & (1 << gated++)) !== 0) {
        skip(commentEnd(text, i, false)); // a server older than the comment's version reads it as a comment
      } else if (marker) {
        executable = true;
        skip(i + marker[0].length);
      } else {
        skip(commentEnd(text, i, rules.postgres === true));
      }
    } else if (c === '*' && next === '/' && executable) {
      executable = false;
      skip(i + 2);
    } else if (c === '$' && rules.postgres && !isNameChar(text[i - 1])) {
      const tag = /^\$(?:[A-Za-z_\x80-\uffff][\w\x80-\uffff]*)?\$/.exec(text.slice(i, i + 64))?.[0];
      if (tag) {
        const close = text.indexOf(tag, i + tag.length);
        skip(close < 0 ? text.length : close + tag.length);
      } else {
        i++;
      }
    } else {
      i++;
    }
  }
  out += text.slice(from);
  return out.split(';');
}

/**
 * Postgres: where a string that ended at `end` goes on (spaces and `--` comments holding a newline, then a quote), the
 * index of that quote; else -1. Postgres reads the whole text before it runs any of it, so what its lexer refuses
 * (a vertical tab before version 16) runs nothing and may be read either way.
 */
function continuation(text: string, end: number, rules: Rules): number {
  if (!rules.postgres || !/[\s-]/.test(text[end] ?? '')) return -1;
  CONTINUATION.lastIndex = end;
  return CONTINUATION.test(text) ? CONTINUATION.lastIndex - 1 : -1;
}
const CONTINUATION = /(?:[ \t\f\v]|--[^\n\r]*)*[\n\r](?:[ \t\n\r\f\v]|--[^\n\r]*[\n\r])*'/y;

/** Postgres' `E'…'` (also `e'…'`): the E must stand alone, not end a name. */
function isEscapePrefix(text: string, quote: number): boolean {
  const prefix = text[quote - 1];
  return (prefix === 'E' || prefix === 'e') && !isNameChar(text[quote - 2]);
}

function isNameChar(c: string | undefined): boolean {
  return c !== undefined && /[\w$\x80-\uffff]/.test(c);
}

/** The index after the quote that closes the one at `open` (doubled quotes stay inside), or the text's end. */
function quoteEnd(text: string, open: number, quote: string, escapes: boolean): number {
  let i = open + 1;
  while (i < text.length) {
    const c = text[i];
    if (escapes && c === '\\') i += 2;
    else if (c !== quote) i++;
    else if (text[i + 1] === quote) i += 2;
    else return i + 1;
  }
  return text.length;
}

function lineEnd(text: string, from: number, rules: Rules): number {
  for (let i = from; i < text.length; i++) {
    if (text[i] === '\n' || (rules.returnEndsLine && text[i] === '\r')) return i;
  }
  return text.length;
}

/** MySQL: `--` opens a comment before a space, a control character or the end (`after` is NaN there). */
function dashOpensComment(after: number, rules: Rules): boolean {
  return !(after > 32) || (rules.looseDash === true && after >= 127);
}

/** The index after the block comment opened at `open`; Postgres nests them, MySQL and SQLite do not. */
function commentEnd(text: string, open: number, nested: boolean): number {
  let depth = 1;
  let i = open + 2;
  while (i < text.length) {
    if (text.startsWith('*/', i)) {
      depth--;
      i += 2;
      if (depth === 0) return i;
    } else if (nested && text.startsWith('/*', i)) {
      depth++;
      i += 2;
    } else {
      i++;
    }
  }
  return text.length;
}

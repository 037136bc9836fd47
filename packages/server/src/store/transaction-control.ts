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
 * PREPARE TRANSACTION, `SET autocommit`; on MySQL also what commits implicitly (DDL other than on temporary tables,
 * LOCK TABLES, grants).
 *
 * Statements are found the way the database finds them, so that a `;` or a keyword inside a string, a quoted name or
 * a comment does not count, and one the database runs is never hidden: Postgres nests block comments, lets `$`
 * continue a name, and reads a backslash in a standard string as a character; MySQL runs the inside of `/*! … *\/`,
 * ends `#` comments at the line and wants a space after `--`. Where a setting changes the rules
 * (`standard_conforming_strings`, `NO_BACKSLASH_ESCAPES`), the text is read both ways and refused if either finds one.
 */
export function endsTransaction(text: string, flavor: SqlFlavor): boolean {
  const ends = flavor === 'mysql' ? endsMysql : endsStatement;
  // One statement with nothing to lex (what Kysely compiles): only its first word counts.
  if (!NEEDS_LEXING.test(text)) return ends(text);
  return LEXINGS[flavor].some((rules) => statementsOf(text, rules).some(ends));
}

const NEEDS_LEXING = /[;#]|\/\*|--/;
const ENDS =
  /^\s*(?:begin|start|commit|end|abort|rollback(?!\s+(?:work\s+|transaction\s+)?to\b)|prepare\s+transaction|set\s+(?:@@(?:session\.)?|session\s+)?autocommit)\b/i;
const MYSQL_IMPLICIT_COMMIT =
  /^\s*(?:alter|create(?!\s+temporary)|drop(?!\s+temporary)|rename|truncate|lock|unlock|grant|revoke|analyze|optimize|repair|flush|install|uninstall|load\s+index|cache\s+index)\b/i;
const endsStatement = (statement: string) => ENDS.test(statement);
const endsMysql = (statement: string) => ENDS.test(statement) || MYSQL_IMPLICIT_COMMIT.test(statement);

interface Rules {
  /** A backslash escapes the next character in every string (else only in Postgres' `E'…'`). */
  backslash: boolean;
  postgres?: boolean;
  mysql?: boolean;
}

const LEXINGS: Record<SqlFlavor, Rules[]> = {
  postgres: [
    { backslash: false, postgres: true },
    { backslash: true, postgres: true },
  ],
  mysql: [
    { backslash: true, mysql: true },
    { backslash: false, mysql: true },
  ],
  sqlite: [{ backslash: false }],
};

/** The statements of a text, with strings, quoted names and comments blanked out. */
function statementsOf(text: string, rules: Rules): string[] {
  let out = '';
  let from = 0; // start of the code not yet copied to `out`
  let executable = false; // inside MySQL's `/*! … */`, whose content runs
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
      skip(quoteEnd(text, i, "'", escapes));
    } else if (c === '"') {
      skip(quoteEnd(text, i, '"', rules.mysql === true && rules.backslash));
    } else if (c === '`' && !rules.postgres) {
      skip(quoteEnd(text, i, '`', false));
    } else if (c === '-' && next === '-' && (!rules.mysql || !(text.charCodeAt(i + 2) > 32))) {
      // MySQL: `--` opens a comment only before a space or a control character (or at the end).
      skip(lineEnd(text, i));
    } else if (c === '#' && rules.mysql) {
      skip(lineEnd(text, i));
    } else if (c === '/' && next === '*') {
      const marker = rules.mysql ? /^\/\*M?!\d*/.exec(text.slice(i, i + 12)) : null;
      if (marker) {
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

function lineEnd(text: string, from: number): number {
  const end = text.indexOf('\n', from);
  return end < 0 ? text.length : end;
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

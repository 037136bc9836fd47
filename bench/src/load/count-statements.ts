/**
 * How many SQL statements one query string holds: `;`-separated parts with something in them, ignoring
 * semicolons inside string literals, quoted identifiers, dollar-quoted bodies and comments. A fast path that
 * sends `BEGIN; INSERT …` as one string is one round trip but two statements.
 */
export function countStatements(text: string): number {
  let count = 0;
  let content = false;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i]!;
    if (c === "'" || c === '"') {
      const end = skipQuoted(text, i, c);
      content = true;
      i = end;
      continue;
    }
    if (c === '-' && text[i + 1] === '-') {
      const nl = text.indexOf('\n', i);
      i = nl < 0 ? n : nl + 1;
      continue;
    }
    if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      i = end < 0 ? n : end + 2;
      continue;
    }
    if (c === '$') {
      const tag = /^\$[A-Za-z_]*\$/.exec(text.slice(i, i + 64))?.[0];
      if (tag) {
        const end = text.indexOf(tag, i + tag.length);
        i = end < 0 ? n : end + tag.length;
        content = true;
        continue;
      }
    }
    if (c === ';') {
      if (content) count++;
      content = false;
    } else if (!/\s/.test(c)) {
      content = true;
    }
    i++;
  }
  return count + (content ? 1 : 0);
}

/** Index just past the closing quote; a doubled quote is an escaped one. */
function skipQuoted(text: string, start: number, quote: string): number {
  let i = start + 1;
  while (i < text.length) {
    if (text[i] === quote) {
      if (text[i + 1] === quote) {
        i += 2;
        continue;
      }
      return i + 1;
    }
    i++;
  }
  return text.length;
}

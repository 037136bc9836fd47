/**
 * The small part of RFC 8941 / 9651 Structured Fields this package speaks: String items, a Dictionary
 * of Strings, and a List of Tokens. Hand-written so the client has no runtime dependency.
 */

/** A key is 1–255 characters of visible ASCII (DESIGN.md, Wire contract). */
const VISIBLE_ASCII = /^[\x21-\x7e]{1,255}$/;
/** What an SF String may hold: printable ASCII, space included. */
const SF_STRING_CHARS = /^[\x20-\x7e]*$/;

export function isValidKey(key: string): boolean {
  return VISIBLE_ASCII.test(key);
}

/** Serializes an SF String: quotes it and escapes `"` and `\`. */
export function serializeString(value: string): string {
  if (!SF_STRING_CHARS.test(value)) {
    throw new TypeError(`Cannot serialize ${JSON.stringify(value)} as a Structured Field String: only printable ASCII`);
  }
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/** Serializes `b<index>="<key>"` members in index order, the `Idempotency-Keys` dictionary. */
export function serializeKeyDictionary(keys: ReadonlyMap<number, string>): string {
  return [...keys]
    .sort(([a], [b]) => a - b)
    .map(([index, key]) => `b${index}=${serializeString(key)}`)
    .join(', ');
}

/** Thrown for any value that is not the Structured Field it should be. */
export class StructuredFieldError extends Error {
  override name = 'StructuredFieldError';
}

class Parser {
  pos = 0;
  constructor(readonly input: string) {}

  get done(): boolean {
    return this.pos >= this.input.length;
  }
  peek(): string {
    return this.input[this.pos] ?? '';
  }
  fail(what: string): never {
    throw new StructuredFieldError(`${what} at position ${this.pos} of ${JSON.stringify(this.input)}`);
  }
  skipSpaces(): void {
    while (this.peek() === ' ') this.pos++;
  }
  skipOWS(): void {
    while (this.peek() === ' ' || this.peek() === '\t') this.pos++;
  }
  /** After a list or dictionary member: true at the end of the field, else consumes the separating comma. */
  endOfMember(): boolean {
    this.skipOWS();
    if (this.done) return true;
    if (this.peek() !== ',') this.fail('members are separated by commas');
    this.pos++;
    this.skipOWS();
    if (this.done) this.fail('trailing comma');
    return false;
  }

  string(): string {
    if (this.peek() !== '"') this.fail('expected a string');
    this.pos++;
    let out = '';
    while (!this.done) {
      const c = this.input[this.pos++]!;
      if (c === '\\') {
        const next = this.input[this.pos++];
        if (next !== '"' && next !== '\\') this.fail('a backslash may only escape a quote or a backslash');
        out += next;
      } else if (c === '"') {
        return out;
      } else if (c < '\x20' || c > '\x7e') {
        this.fail('not printable ASCII inside a string');
      } else {
        out += c;
      }
    }
    return this.fail('unterminated string');
  }

  key(): string {
    const start = this.pos;
    if (!/[a-z*]/.test(this.peek())) this.fail('a key starts with a lowercase letter or *');
    while (/[a-z0-9_\-.*]/.test(this.peek())) this.pos++;
    return this.input.slice(start, this.pos);
  }

  token(): string {
    const start = this.pos;
    if (!/[A-Za-z*]/.test(this.peek())) this.fail('expected a token');
    while (/[!#$%&'*+\-.^_`|~0-9A-Za-z:/]/.test(this.peek())) this.pos++;
    return this.input.slice(start, this.pos);
  }

  /** Parses and discards any bare item: parameters are read only to be skipped. */
  bareItem(): unknown {
    const c = this.peek();
    if (c === '"') return this.string();
    if (c === '?') {
      this.pos++;
      const b = this.input[this.pos++];
      if (b !== '0' && b !== '1') this.fail('expected a boolean');
      return b === '1';
    }
    if (c === ':') {
      const end = this.input.indexOf(':', this.pos + 1);
      if (end < 0) this.fail('unterminated byte sequence');
      this.pos = end + 1;
      return undefined;
    }
    if (c === '-' || /[0-9]/.test(c)) {
      const m = /^-?[0-9]{1,15}(\.[0-9]{1,3})?/.exec(this.input.slice(this.pos));
      if (!m) this.fail('expected a number');
      this.pos += m[0].length;
      return Number(m[0]);
    }
    return this.token();
  }

  parameters(): void {
    while (this.peek() === ';') {
      this.pos++;
      this.skipSpaces();
      this.key();
      if (this.peek() === '=') {
        this.pos++;
        this.bareItem();
      }
    }
  }
}

/** Parses an SF Item that must be a String; its parameters are ignored. */
export function parseStringItem(value: string): string {
  const p = new Parser(value.replace(/^ +| +$/g, ''));
  const s = p.string();
  p.parameters();
  if (!p.done) p.fail('trailing characters after the item');
  return s;
}

/** Parses an SF Dictionary whose members must all be Strings; the last duplicate wins (RFC 8941). */
export function parseStringDictionary(value: string): Map<string, string> {
  const p = new Parser(value.replace(/^ +| +$/g, ''));
  const out = new Map<string, string>();
  while (!p.done) {
    const key = p.key();
    if (p.peek() !== '=') p.fail(`member ${key} has no value; values must be strings`);
    p.pos++;
    out.delete(key);
    out.set(key, p.string());
    p.parameters();
    if (p.endOfMember()) break;
  }
  return out;
}

/** Parses an SF List of Tokens (such as `b0, b2`); parameters are ignored. */
export function parseTokenList(value: string): string[] {
  const p = new Parser(value.replace(/^ +| +$/g, ''));
  const out: string[] = [];
  while (!p.done) {
    out.push(p.token());
    p.parameters();
    if (p.endOfMember()) break;
  }
  return out;
}

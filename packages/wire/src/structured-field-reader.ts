/**
 * A cursor over a Structured Field value (RFC 8941, with the RFC 9651 Date and Display String bare items so a
 * newer sender's parameters still parse). Hand-written and limited to what the idempotency headers need: String
 * Items, Dictionaries of Strings and Lists of Tokens. Parameters are checked for syntax and then ignored. Written
 * by hand rather than taken from `structured-headers` (the tests' oracle): that package is 1.2 kB gzip larger in
 * a browser bundle, and its 2.1.0 rejects a Date followed by anything (`"k";d=@1;e=2`).
 */
export class StructuredFieldSyntaxError extends Error {
  override readonly name = 'StructuredFieldSyntaxError';
  constructor(
    message: string,
    readonly position: number,
  ) {
    super(`${message} at character ${position + 1}`);
  }
}

const SP = 0x20;
const HTAB = 0x09;
const DQUOTE = 0x22;
const BACKSLASH = 0x5c;

const isOWS = (c: number) => c === SP || c === HTAB;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const isLcalpha = (c: number) => c >= 0x61 && c <= 0x7a;
const isAlpha = (c: number) => isLcalpha(c) || (c >= 0x41 && c <= 0x5a);
// tchar (RFC 9110) plus ":" and "/", as sf-token allows after its first character.
const TOKEN_CHARS = /^[!#$%&'*+\-.^_`|~0-9A-Za-z:/]$/;
const BASE64_CHARS = /^[A-Za-z0-9+/=]$/;
const HEX_PAIR = /^[0-9a-f]{2}$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

function isUtf8(bytes: number[]): boolean {
  try {
    utf8.decode(new Uint8Array(bytes));
    return true;
  } catch {
    return false;
  }
}

export class StructuredFieldReader {
  pos = 0;

  constructor(readonly input: string) {}

  atEnd(): boolean {
    return this.pos >= this.input.length;
  }

  peek(): number {
    return this.pos < this.input.length ? this.input.charCodeAt(this.pos) : -1;
  }

  fail(message: string): never {
    throw new StructuredFieldSyntaxError(message, this.pos);
  }

  /**
   * Leading and trailing whitespace is not part of a field value: HTTP strips OWS (spaces and tabs) around it,
   * and RFC 8941 §4.2 discards leading and trailing spaces before parsing.
   */
  static trimOWS(value: string): string {
    let start = 0;
    let end = value.length;
    while (start < end && isOWS(value.charCodeAt(start))) start++;
    while (end > start && isOWS(value.charCodeAt(end - 1))) end--;
    return value.slice(start, end);
  }

  skipSP(): void {
    while (this.peek() === SP) this.pos++;
  }

  /** OWS: spaces and tabs, allowed around the commas between members. */
  skipOWS(): void {
    while (isOWS(this.peek())) this.pos++;
  }

  expectEnd(what: string): void {
    if (!this.atEnd()) this.fail(`unexpected characters after the ${what}`);
  }

  /** sf-string: DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) ) DQUOTE, chars limited to 0x20–0x7E. */
  parseString(): string {
    if (this.peek() !== DQUOTE) this.fail('expected a quoted string');
    this.pos++;
    let out = '';
    let runStart = this.pos;
    while (this.pos < this.input.length) {
      const c = this.input.charCodeAt(this.pos);
      if (c === DQUOTE) {
        out += this.input.slice(runStart, this.pos);
        this.pos++;
        return out;
      }
      if (c === BACKSLASH) {
        out += this.input.slice(runStart, this.pos);
        const next = this.input.charCodeAt(this.pos + 1);
        if (next !== DQUOTE && next !== BACKSLASH) {
          this.pos++;
          this.fail('a backslash in a string may only escape a quote or a backslash');
        }
        out += this.input[this.pos + 1];
        this.pos += 2;
        runStart = this.pos;
        continue;
      }
      if (c < 0x20 || c > 0x7e) this.fail('strings may only contain printable ASCII');
      this.pos++;
    }
    return this.fail('unterminated string');
  }

  /** key = ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" ) */
  parseKey(): string {
    const start = this.pos;
    const first = this.peek();
    if (!isLcalpha(first) && first !== 0x2a) this.fail('a key must start with a lowercase letter or "*"');
    this.pos++;
    for (let c = this.peek(); isLcalpha(c) || isDigit(c) || c === 0x5f || c === 0x2d || c === 0x2e || c === 0x2a; ) {
      this.pos++;
      c = this.peek();
    }
    return this.input.slice(start, this.pos);
  }

  /** parameters = *( ";" *SP key [ "=" bare-item ] ); validated, then discarded. */
  skipParameters(): void {
    while (this.peek() === 0x3b) {
      this.pos++;
      this.skipSP();
      this.parseKey();
      if (this.peek() === 0x3d) {
        this.pos++;
        this.skipBareItem();
      }
    }
  }

  /** inner-list = "(" *SP [ sf-item *( 1*SP sf-item ) *SP ] ")" parameters; syntax only. */
  skipInnerList(): void {
    this.pos++;
    for (;;) {
      this.skipSP();
      if (this.peek() === 0x29) {
        this.pos++;
        this.skipParameters();
        return;
      }
      this.skipBareItem();
      this.skipParameters();
      const c = this.peek();
      if (c !== SP && c !== 0x29) this.fail('items of an inner list must be separated by spaces');
    }
  }

  /** Reads any bare item for its syntax only. */
  skipBareItem(): void {
    const c = this.peek();
    if (c === DQUOTE) this.parseString();
    else if (c === 0x2d || isDigit(c)) this.skipNumber();
    else if (c === 0x2a || isAlpha(c)) this.parseToken();
    else if (c === 0x3a) this.skipByteSequence();
    else if (c === 0x3f) this.skipBoolean();
    else if (c === 0x40) {
      this.pos++;
      this.skipNumber(true);
    } else if (c === 0x25) this.skipDisplayString();
    else this.fail('expected a value');
  }

  private skipNumber(integerOnly = false): void {
    if (this.peek() === 0x2d) this.pos++;
    let intDigits = 0;
    while (isDigit(this.peek())) {
      this.pos++;
      intDigits++;
    }
    if (intDigits === 0) this.fail('expected a digit');
    if (this.peek() !== 0x2e) {
      if (intDigits > 15) this.fail('an integer has at most 15 digits');
      return;
    }
    if (integerOnly) this.fail('a date must be an integer');
    if (intDigits > 12) this.fail('a decimal has at most 12 integer digits');
    this.pos++;
    let fracDigits = 0;
    while (isDigit(this.peek())) {
      this.pos++;
      fracDigits++;
    }
    if (fracDigits < 1 || fracDigits > 3) this.fail('a decimal has 1 to 3 fractional digits');
  }

  /** sf-token = ( ALPHA / "*" ) *( tchar / ":" / "/" ) */
  parseToken(): string {
    const start = this.pos;
    const first = this.peek();
    if (first !== 0x2a && !isAlpha(first)) this.fail('a token must start with a letter or "*"');
    this.pos++;
    while (!this.atEnd() && TOKEN_CHARS.test(this.input[this.pos]!)) this.pos++;
    return this.input.slice(start, this.pos);
  }

  private skipByteSequence(): void {
    this.pos++;
    while (!this.atEnd() && BASE64_CHARS.test(this.input[this.pos]!)) this.pos++;
    if (this.peek() !== 0x3a) this.fail('unterminated byte sequence');
    this.pos++;
  }

  private skipBoolean(): void {
    this.pos++;
    const c = this.peek();
    if (c !== 0x30 && c !== 0x31) this.fail('a boolean is ?0 or ?1');
    this.pos++;
  }

  private skipDisplayString(): void {
    this.pos++;
    if (this.peek() !== DQUOTE) this.fail('expected a quote after %');
    this.pos++;
    const bytes: number[] = [];
    while (!this.atEnd()) {
      const c = this.input.charCodeAt(this.pos);
      if (c === DQUOTE) {
        if (!isUtf8(bytes)) this.fail('a display string must decode to UTF-8');
        this.pos++;
        return;
      }
      if (c < 0x20 || c > 0x7e) this.fail('display strings may only contain printable ASCII');
      if (c === 0x25) {
        const hex = this.input.slice(this.pos + 1, this.pos + 3);
        if (!HEX_PAIR.test(hex)) this.fail('"%" in a display string must be followed by two lowercase hex digits');
        bytes.push(Number.parseInt(hex, 16));
        this.pos += 3;
        continue;
      }
      bytes.push(c);
      this.pos++;
    }
    this.fail('unterminated display string');
  }
}

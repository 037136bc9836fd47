/**
 * A canonical, type-tagged text for a procedure input, so that equal inputs encode equal and any changed value
 * (including a change of type: a Date versus its ISO string, 1n versus 1) encodes differently.
 *
 * Grammar (every element is self-delimiting, so concatenations never collide):
 *   null `n`   undefined `u`   true `t`   false `f`
 *   number `d<String(n)>;` with -0 as `d-0;` (NaN and ±Infinity spelled out)   bigint `i<digits>;`
 *   string `s<length>:<chars>`   Date `D<epoch ms or NaN>;`   RegExp `R` source flags   URL `L` href
 *   array `[` elements `]` (order kept, holes and undefined as `u`)
 *   object `{` (key value)* `}`: own enumerable string keys sorted, undefined values omitted, symbol keys ignored;
 *     an instance of a class is `O` + constructor name + the same, so it never equals a plain object
 *   Map `M` (key value)* `}` with entries sorted by their encoding; Set `S` members sorted by their encoding `}`
 *   typed arrays, DataView, ArrayBuffer `B<kind>;<length>:<base64 bytes>`   Error `E` name message + own props
 *   a boxed primitive, or an instance with its own toJSON(): `J` + constructor name + the encoding of that value
 *   FormData `F` (name value)* `}` in the order sent (repeated names kept); a value is a string or a File
 *   Blob `Yb` type `h<SHA-256 hex of its bytes>;`   File `Yf` type name `h…;` (lastModified ignored: a server
 *     parsing a multipart body stamps it with the time of parsing)
 * Functions and symbols cannot be part of an input (JSON and superjson drop them): they throw, naming the path.
 * A ReadableStream (tRPC's octet-stream input) throws too: reading it would consume the handler's input.
 * Cycles throw; a shared (non-cyclic) reference is encoded at each place it appears.
 * Depth and size are bounded (`EncodeLimits`), so a hostile input is refused instead of overflowing the stack.
 */

/** How deep and how large an input may be. */
export interface EncodeLimits {
  /** Most levels of nested arrays, objects, Maps, Sets and FormData. */
  maxDepth: number;
  /** Most characters of encoding, where a Blob's or File's contents count their size in bytes. */
  maxBytes: number;
}

import { sha256Hex } from './sha256.js';

export const DEFAULT_ENCODE_LIMITS: EncodeLimits = Object.freeze({ maxDepth: 100, maxBytes: 16 * 1_048_576 });

/** `unsupported`: a value that is not data; `too_deep` / `too_large`: past `EncodeLimits`. */
export type CanonicalEncodeProblem = 'unsupported' | 'too_deep' | 'too_large';

export class CanonicalEncodeError extends TypeError {
  override readonly name = 'CanonicalEncodeError';
  readonly path: (string | number)[] = [];
  constructor(
    readonly problem: string,
    readonly kind: CanonicalEncodeProblem = 'unsupported',
  ) {
    super(problem);
  }

  /** Called while unwinding so the message names where in the input the problem is. */
  addPathSegment(segment: string | number): void {
    this.path.unshift(segment);
    this.message = `${this.problem} at ${formatPath(this.path)}`;
  }
}

function formatPath(path: readonly (string | number)[]): string {
  let out = '(root)';
  for (const segment of path) {
    out +=
      typeof segment === 'number'
        ? `[${segment}]`
        : /^[A-Za-z_$][\w$]*$/.test(segment)
          ? `.${segment}`
          : `[${JSON.stringify(segment)}]`;
  }
  return out;
}

function str(value: string): string {
  return `s${value.length}:${value}`;
}

function num(value: number): string {
  return Object.is(value, -0) ? 'd-0;' : `d${value};`;
}

// btoa over chunks rather than Buffer, which edge runtimes lack; the output is the same standard base64.
function base64(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

function bytes(kind: string, view: ArrayBufferView | ArrayBuffer): string {
  const array =
    view instanceof ArrayBuffer ? new Uint8Array(view) : new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  const encoded = base64(array);
  return `B${kind};${encoded.length}:${encoded}`;
}

// Recognised by their tag and methods rather than `instanceof` alone: a polyfill's or another realm's FormData or
// Blob would otherwise fall through to "an object with no properties" and every one would encode the same.
const tagOf = (v: object): string => Object.prototype.toString.call(v).slice(8, -1);
const hasMethod = (v: object, name: string): boolean => typeof (v as Record<string, unknown>)[name] === 'function';
const isBlob = (v: object): v is Blob =>
  (typeof Blob !== 'undefined' && v instanceof Blob) ||
  ((tagOf(v) === 'Blob' || tagOf(v) === 'File') && hasMethod(v, 'arrayBuffer'));
const isFile = (v: Blob): v is File => (typeof File !== 'undefined' && v instanceof File) || tagOf(v) === 'File';
const isFormData = (v: object): v is FormData =>
  (typeof FormData !== 'undefined' && v instanceof FormData) || (tagOf(v) === 'FormData' && hasMethod(v, 'entries'));
// A web ReadableStream, or a Node Readable (`pipe` + `read`): either is consumed by reading it.
const isStream = (v: object): boolean =>
  (typeof ReadableStream !== 'undefined' && v instanceof ReadableStream) ||
  hasMethod(v, 'getReader') ||
  (hasMethod(v, 'pipe') && hasMethod(v, 'read'));

const STREAM_REFUSED =
  'Cannot fingerprint a binary stream (an application/octet-stream input): it cannot be fingerprinted without ' +
  "consuming the handler's input. Send the file in FormData, which is fingerprinted by its content";

/**
 * One encoding pass. Blob contents need an async read: a pass that meets a Blob whose digest it was not given
 * records it in `missing` and counts its size, so the caller can digest those and run a second pass.
 */
class Encoder {
  #out: string[] = [];
  #size = 0;
  #depth = 0;
  readonly #ancestors = new Set<object>();
  readonly missing = new Set<Blob>();

  constructor(
    readonly limits: EncodeLimits,
    readonly digests: ReadonlyMap<Blob, string>,
  ) {}

  text(): string {
    return this.#out.join('');
  }

  #push(part: string, cost = part.length): void {
    this.#size += cost;
    if (this.#size > this.limits.maxBytes) {
      throw new CanonicalEncodeError(
        `Cannot fingerprint an input larger than ${this.limits.maxBytes} bytes`,
        'too_large',
      );
    }
    this.#out.push(part);
  }

  encode(value: unknown): void {
    switch (typeof value) {
      case 'string':
        this.#push(str(value));
        return;
      case 'number':
        this.#push(num(value));
        return;
      case 'boolean':
        this.#push(value ? 't' : 'f');
        return;
      case 'undefined':
        this.#push('u');
        return;
      case 'bigint':
        this.#push(`i${value};`);
        return;
      case 'function':
        throw new CanonicalEncodeError('Cannot fingerprint a function');
      case 'symbol':
        throw new CanonicalEncodeError('Cannot fingerprint a symbol');
    }
    if (value === null) {
      this.#push('n');
      return;
    }
    const object = value as object;
    if (this.#ancestors.has(object)) throw new CanonicalEncodeError('Cannot fingerprint a cyclic structure');
    if (this.#depth >= this.limits.maxDepth) {
      throw new CanonicalEncodeError(
        `Cannot fingerprint an input nested deeper than ${this.limits.maxDepth} levels`,
        'too_deep',
      );
    }
    this.#ancestors.add(object);
    this.#depth++;
    try {
      this.#encodeObject(object);
    } finally {
      this.#depth--;
      this.#ancestors.delete(object);
    }
  }

  #child(value: unknown, segment: string | number): void {
    try {
      this.encode(value);
    } catch (error) {
      if (error instanceof CanonicalEncodeError && error.kind !== 'too_large') error.addPathSegment(segment);
      throw error;
    }
  }

  /** Encodes into a separate string (for sorting); its size still counts towards the limit. */
  #childToString(value: unknown, segment: string | number): string {
    const outer = this.#out;
    this.#out = [];
    try {
      this.#child(value, segment);
      return this.#out.join('');
    } finally {
      this.#out = outer;
    }
  }

  #sorted(items: string[], open: string): void {
    items.sort();
    // Already counted while encoded apart.
    this.#out.push(open, ...items, '}');
  }

  #properties(object: object): void {
    const record = object as Record<string, unknown>;
    const keys = Object.keys(record).sort();
    for (const key of keys) {
      const v = record[key];
      if (v === undefined) continue;
      this.#push(str(key));
      this.#child(v, key);
    }
    this.#push('}');
  }

  #blob(blob: Blob): void {
    this.#push(isFile(blob) ? `Yf${str(blob.type)}${str(blob.name)}` : `Yb${str(blob.type)}`);
    const digest = this.digests.get(blob);
    if (digest === undefined) this.missing.add(blob);
    this.#push(`h${digest ?? ''};`, blob.size);
  }

  #formData(form: FormData): void {
    this.#push('F');
    for (const [name, value] of form) {
      this.#push(str(name));
      if (typeof value === 'string') this.#push(str(value));
      else this.#blob(value);
    }
    this.#push('}');
  }

  #encodeObject(object: object): void {
    if (Array.isArray(object)) {
      this.#push('[');
      for (let i = 0; i < object.length; i++) this.#child(object[i], i);
      this.#push(']');
      return;
    }
    const proto = Object.getPrototypeOf(object);
    if (proto === Object.prototype || proto === null) {
      this.#push('{');
      this.#properties(object);
      return;
    }
    if (object instanceof Date) {
      this.#push(`D${object.getTime()};`);
      return;
    }
    if (object instanceof Map) {
      const entries: string[] = [];
      let i = 0;
      for (const [k, v] of object) {
        // Key and value are each self-delimiting, so sorting the concatenation sorts by key, then by value.
        entries.push(this.#childToString(k, `<map key ${i}>`) + this.#childToString(v, `<map value ${i}>`));
        i++;
      }
      this.#sorted(entries, 'M');
      return;
    }
    if (object instanceof Set) {
      const members: string[] = [];
      let i = 0;
      for (const member of object) members.push(this.#childToString(member, `<set member ${i++}>`));
      this.#sorted(members, 'S');
      return;
    }
    if (ArrayBuffer.isView(object)) {
      // Object.prototype.toString names the element type; a Node Buffer reads as the Uint8Array it is.
      const kind = Object.prototype.toString.call(object).slice(8, -1);
      this.#push(bytes(kind, object));
      return;
    }
    if (object instanceof ArrayBuffer) {
      this.#push(bytes('ArrayBuffer', object));
      return;
    }
    if (isBlob(object)) {
      this.#blob(object);
      return;
    }
    if (isFormData(object)) {
      this.#formData(object);
      return;
    }
    if (isStream(object)) throw new CanonicalEncodeError(STREAM_REFUSED);
    if (object instanceof RegExp) {
      this.#push(`R${str(object.source)}${str(object.flags)}`);
      return;
    }
    if (object instanceof URL) {
      this.#push(`L${str(object.href)}`);
      return;
    }
    if (object instanceof Error) {
      this.#push(`E${str(object.name)}${str(object.message)}`);
      this.#properties(object);
      return;
    }
    const name = typeof proto?.constructor === 'function' ? String(proto.constructor.name) : '';
    if (
      object instanceof Number ||
      object instanceof String ||
      object instanceof Boolean ||
      object instanceof BigInt ||
      typeof (object as { toJSON?: unknown }).toJSON === 'function'
    ) {
      // Boxed primitives and classes that define their own JSON form (Decimal, Temporal, …) keep their state where
      // own properties do not show it: their primitive or JSON value says what they are.
      const inner =
        typeof (object as { toJSON?: unknown }).toJSON === 'function'
          ? (object as { toJSON(): unknown }).toJSON()
          : object.valueOf();
      this.#push(`J${str(name)}`);
      this.#child(inner, '<value>');
      return;
    }
    this.#push(`O${str(name)}`);
    this.#properties(object);
  }
}

/** A first pass has no Blob digests yet; one shared empty map spares an allocation per call. */
const NO_DIGESTS: ReadonlyMap<Blob, string> = new Map();

/**
 * The canonical encoding of `value`; throws `CanonicalEncodeError` for functions, symbols, streams, cycles and
 * inputs past `limits`. Synchronous, so it refuses a Blob (its bytes need an async read): use `canonicalEncodeAsync`.
 */
export function canonicalEncode(value: unknown, limits: EncodeLimits = DEFAULT_ENCODE_LIMITS): string {
  const text = canonicalEncodeWithoutBlobs(value, limits);
  if (text === undefined) {
    throw new CanonicalEncodeError('Cannot fingerprint a Blob synchronously: use canonicalEncodeAsync');
  }
  return text;
}

/** `canonicalEncode`, or undefined when the value holds a Blob whose bytes must be read (`canonicalEncodeAsync`). */
export function canonicalEncodeWithoutBlobs(
  value: unknown,
  limits: EncodeLimits = DEFAULT_ENCODE_LIMITS,
): string | undefined {
  const encoder = new Encoder(limits, NO_DIGESTS);
  encoder.encode(value);
  return encoder.missing.size > 0 ? undefined : encoder.text();
}

/** `canonicalEncode` for any input, Blobs, Files and FormData included: their bytes are read and digested. */
export async function canonicalEncodeAsync(
  value: unknown,
  limits: EncodeLimits = DEFAULT_ENCODE_LIMITS,
): Promise<string> {
  const first = new Encoder(limits, NO_DIGESTS);
  first.encode(value);
  if (first.missing.size === 0) return first.text();
  // The first pass counted every Blob's size, so nothing larger than the limit is read.
  const digests = new Map<Blob, string>();
  await Promise.all(
    [...first.missing].map(async (blob) => digests.set(blob, await sha256Hex(await blob.arrayBuffer()))),
  );
  const second = new Encoder(limits, digests);
  second.encode(value);
  return second.text();
}

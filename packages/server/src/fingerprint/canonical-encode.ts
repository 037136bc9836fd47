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
 * Functions and symbols cannot be part of an input (JSON and superjson drop them): they throw, naming the path.
 * Cycles throw; a shared (non-cyclic) reference is encoded at each place it appears.
 */

export class CanonicalEncodeError extends TypeError {
  override readonly name = 'CanonicalEncodeError';
  readonly path: (string | number)[] = [];
  constructor(readonly problem: string) {
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

function bytes(kind: string, view: ArrayBufferView | ArrayBuffer): string {
  const buffer =
    view instanceof ArrayBuffer ? Buffer.from(view) : Buffer.from(view.buffer, view.byteOffset, view.byteLength);
  const base64 = buffer.toString('base64');
  return `B${kind};${base64.length}:${base64}`;
}

function encodeSorted(items: string[], open: string, out: string[]): void {
  items.sort();
  out.push(open);
  for (const item of items) out.push(item);
  out.push('}');
}

function encodeInto(value: unknown, out: string[], ancestors: Set<object>): void {
  switch (typeof value) {
    case 'string':
      out.push(str(value));
      return;
    case 'number':
      out.push(num(value));
      return;
    case 'boolean':
      out.push(value ? 't' : 'f');
      return;
    case 'undefined':
      out.push('u');
      return;
    case 'bigint':
      out.push(`i${value};`);
      return;
    case 'function':
      throw new CanonicalEncodeError('Cannot fingerprint a function');
    case 'symbol':
      throw new CanonicalEncodeError('Cannot fingerprint a symbol');
  }
  if (value === null) {
    out.push('n');
    return;
  }
  const object = value as object;
  if (ancestors.has(object)) throw new CanonicalEncodeError('Cannot fingerprint a cyclic structure');
  ancestors.add(object);
  try {
    encodeObject(object, out, ancestors);
  } finally {
    ancestors.delete(object);
  }
}

function child(value: unknown, segment: string | number, out: string[], ancestors: Set<object>): void {
  try {
    encodeInto(value, out, ancestors);
  } catch (error) {
    if (error instanceof CanonicalEncodeError) error.addPathSegment(segment);
    throw error;
  }
}

function encodeToString(value: unknown, segment: string | number, ancestors: Set<object>): string {
  const parts: string[] = [];
  child(value, segment, parts, ancestors);
  return parts.join('');
}

function encodeProperties(object: object, out: string[], ancestors: Set<object>): void {
  const record = object as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  for (const key of keys) {
    const v = record[key];
    if (v === undefined) continue;
    out.push(str(key));
    child(v, key, out, ancestors);
  }
  out.push('}');
}

function encodeObject(object: object, out: string[], ancestors: Set<object>): void {
  if (Array.isArray(object)) {
    out.push('[');
    for (let i = 0; i < object.length; i++) child(object[i], i, out, ancestors);
    out.push(']');
    return;
  }
  const proto = Object.getPrototypeOf(object);
  if (proto === Object.prototype || proto === null) {
    out.push('{');
    encodeProperties(object, out, ancestors);
    return;
  }
  if (object instanceof Date) {
    out.push(`D${object.getTime()};`);
    return;
  }
  if (object instanceof Map) {
    const entries: string[] = [];
    let i = 0;
    for (const [k, v] of object) {
      // Key and value are each self-delimiting, so sorting the concatenation sorts by key, then by value.
      entries.push(encodeToString(k, `<map key ${i}>`, ancestors) + encodeToString(v, `<map value ${i}>`, ancestors));
      i++;
    }
    encodeSorted(entries, 'M', out);
    return;
  }
  if (object instanceof Set) {
    const members: string[] = [];
    let i = 0;
    for (const member of object) members.push(encodeToString(member, `<set member ${i++}>`, ancestors));
    encodeSorted(members, 'S', out);
    return;
  }
  if (ArrayBuffer.isView(object)) {
    // Object.prototype.toString names the element type; a Node Buffer reads as the Uint8Array it is.
    const kind = Object.prototype.toString.call(object).slice(8, -1);
    out.push(bytes(kind, object));
    return;
  }
  if (object instanceof ArrayBuffer) {
    out.push(bytes('ArrayBuffer', object));
    return;
  }
  if (object instanceof RegExp) {
    out.push(`R${str(object.source)}${str(object.flags)}`);
    return;
  }
  if (object instanceof URL) {
    out.push(`L${str(object.href)}`);
    return;
  }
  if (object instanceof Error) {
    out.push(`E${str(object.name)}${str(object.message)}`);
    encodeProperties(object, out, ancestors);
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
    out.push(`J${str(name)}`);
    child(inner, '<value>', out, ancestors);
    return;
  }
  out.push(`O${str(name)}`);
  encodeProperties(object, out, ancestors);
}

/** The canonical encoding of `value`; throws `CanonicalEncodeError` for functions, symbols and cycles. */
export function canonicalEncode(value: unknown): string {
  const out: string[] = [];
  encodeInto(value, out, new Set());
  return out.join('');
}

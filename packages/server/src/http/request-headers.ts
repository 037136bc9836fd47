/**
 * Reading a request header from whatever the app's `createContext` put in `ctx`. tRPC adapters hand the request to
 * `createContext` but put nothing in `ctx` themselves, so the shapes below are the ones each adapter gives:
 * - fetch / Next.js App Router: `ctx.req` is a `Request` (`headers` is a `Headers`)
 * - standalone / Express: `ctx.req` is a Node `IncomingMessage` (`headers` is a lower-cased record)
 * - Fastify: `ctx.req` is a `FastifyRequest` (`headers` is the same record)
 * - or `ctx.headers` itself, as a `Headers` or a record in any letter case.
 */

type HeaderRecord = Record<string, unknown>;

interface HeadersLike {
  get(name: string): string | null;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

function isHeadersLike(value: Record<string, unknown>): value is Record<string, unknown> & HeadersLike {
  // `Headers` (global, undici or a polyfill) and Next.js' ReadonlyHeaders look names up case-insensitively
  // through get(); a Map also has get() but is case-sensitive, so it is read as a record of entries instead.
  return typeof value.get === 'function' && !(value instanceof Map);
}

function fromValue(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  // Node keeps some repeated headers as arrays; HTTP semantics join them with a comma.
  if (Array.isArray(value)) return value.every((v) => typeof v === 'string') ? value.join(', ') : undefined;
  if (typeof value === 'number') return String(value);
  return undefined;
}

function fromRecord(record: HeaderRecord, lowerName: string): string | undefined {
  // Node and Fastify lower-case names, so the direct lookup almost always hits.
  if (Object.hasOwn(record, lowerName)) return fromValue(record[lowerName]);
  for (const name of Object.keys(record)) {
    if (name.toLowerCase() === lowerName) return fromValue(record[name]);
  }
  return undefined;
}

function fromMap(map: Map<unknown, unknown>, lowerName: string): string | undefined {
  for (const [name, value] of map) {
    if (typeof name === 'string' && name.toLowerCase() === lowerName) return fromValue(value);
  }
  return undefined;
}

/** Reads `name` from a `Headers`, a `Map` or a plain record; undefined when absent or not a header container. */
export function readHeader(headers: unknown, name: string): string | undefined {
  if (!isObject(headers)) return undefined;
  const lowerName = name.toLowerCase();
  if (headers instanceof Map) return fromMap(headers, lowerName);
  if (isHeadersLike(headers)) {
    const value = headers.get(lowerName);
    return typeof value === 'string' ? value : undefined;
  }
  return fromRecord(headers, lowerName);
}

/**
 * Reads request header `name` (any letter case) from `ctx.req`'s headers, else from `ctx.headers`.
 * Repeated headers come back joined with ", ". Undefined when absent or when `ctx` carries no request.
 */
export function readRequestHeader(ctx: unknown, name: string): string | undefined {
  if (!isObject(ctx)) return undefined;
  const req = ctx.req;
  if (isObject(req)) {
    const value = readHeader(req.headers, name);
    if (value !== undefined) return value;
  }
  return readHeader(ctx.headers, name);
}

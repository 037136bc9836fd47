/**
 * Writing response headers through whatever the app's `createContext` passed on:
 * - fetch / Next.js App Router: `ctx.resHeaders` (the `Headers` tRPC merges into its `Response`)
 * - standalone / Express: `ctx.res`, a Node `ServerResponse` (`setHeader`)
 * - Fastify: `ctx.res`, a `FastifyReply` (`header`)
 * Headers can only be written until the response has started: a streamed batch sends them before any call
 * resolves, so there the write is skipped and reported as `false`.
 */

export const REPLAYED_HEADER = 'Idempotent-Replayed';
export const RETRY_AFTER_HEADER = 'Retry-After';

interface HeaderSink {
  get(name: string): string | undefined;
  set(name: string, value: string): boolean;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

function asString(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number') return String(value);
  if (Array.isArray(value)) return value.join(', ');
  return undefined;
}

function headersSink(headers: Record<string, unknown>): HeaderSink | undefined {
  if (typeof headers.set !== 'function' || typeof headers.get !== 'function') return undefined;
  const h = headers as unknown as Headers;
  return {
    get: (name) => h.get(name) ?? undefined,
    set: (name, value) => {
      h.set(name, value);
      return true;
    },
  };
}

function resSink(res: Record<string, unknown>): HeaderSink | undefined {
  // Node ServerResponse (and Express' res, which extends it).
  if (typeof res.setHeader === 'function') {
    const r = res as unknown as {
      setHeader(n: string, v: string): void;
      getHeader?(n: string): unknown;
      headersSent?: boolean;
      writableEnded?: boolean;
    };
    return {
      get: (name) => asString(r.getHeader?.(name)),
      set: (name, value) => {
        if (r.headersSent === true || r.writableEnded === true) return false;
        r.setHeader(name, value);
        return true;
      },
    };
  }
  // FastifyReply: header()/getHeader(), and `sent` once the reply went out.
  if (typeof res.header === 'function') {
    const r = res as unknown as {
      header(n: string, v: string): unknown;
      getHeader?(n: string): unknown;
      sent?: boolean;
      raw?: { headersSent?: boolean };
    };
    return {
      get: (name) => asString(r.getHeader?.(name)),
      set: (name, value) => {
        if (r.sent === true || r.raw?.headersSent === true) return false;
        r.header(name, value);
        return true;
      },
    };
  }
  return undefined;
}

function sinkOf(ctx: unknown): HeaderSink | undefined {
  if (!isObject(ctx)) return undefined;
  if (isObject(ctx.resHeaders)) {
    const sink = headersSink(ctx.resHeaders);
    if (sink) return sink;
  }
  if (isObject(ctx.res)) return resSink(ctx.res);
  return undefined;
}

/**
 * Sets a response header where `ctx` allows it. Returns false when there is nowhere to write or the response has
 * already started (never throws for that: the header is an extra, the result in the body is the truth).
 */
export function setResponseHeader(ctx: unknown, name: string, value: string): boolean {
  const sink = sinkOf(ctx);
  if (!sink) return false;
  try {
    return sink.set(name, value);
  } catch {
    // ERR_HTTP_HEADERS_SENT from a response that started between the check and the write.
    return false;
  }
}

const BATCH_TOKEN = /^b(0|[1-9][0-9]*)$/;

/**
 * Flags a replayed call: `Idempotent-Replayed: true` for a single call; for a batch, the SF List of replayed calls'
 * `b<batchIndex>` tokens, merged with what other calls of the same batch already set and kept in index order
 * (`b0, b2`) so the header does not depend on which call finished first.
 */
export function markReplayed(ctx: unknown, form: 'single' | 'batch', batchIndex: number): void {
  if (form === 'single') {
    setResponseHeader(ctx, REPLAYED_HEADER, 'true');
    return;
  }
  const sink = sinkOf(ctx);
  if (!sink) return;
  const indexes = new Set<number>([batchIndex]);
  for (const token of (sink.get(REPLAYED_HEADER) ?? '').split(',')) {
    const match = BATCH_TOKEN.exec(token.trim());
    if (match) indexes.add(Number(match[1]));
  }
  const value = [...indexes]
    .sort((a, b) => a - b)
    .map((i) => `b${i}`)
    .join(', ');
  setResponseHeader(ctx, REPLAYED_HEADER, value);
}

/**
 * `Retry-After` in whole seconds, rounded up so the client never comes back early. Call it only for a response
 * that carries a single call: in a batch the calls have different answers and one header cannot speak for all.
 */
export function setRetryAfter(ctx: unknown, retryAfterMs: number): void {
  const seconds = Number.isFinite(retryAfterMs) && retryAfterMs > 0 ? Math.ceil(retryAfterMs / 1000) : 0;
  setResponseHeader(ctx, RETRY_AFTER_HEADER, String(seconds));
}

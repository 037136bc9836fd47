import type { HTTPHeaders, Operation } from '@trpc/client';
import { encodeKeyHeader, encodeKeysHeader, KEY_HEADER, KEYS_HEADER } from './internals/key-headers.js';
import { recordBatchIndex } from './internals/response-meta.js';

/** What tRPC's HTTP links pass to `headers`: `{ op }` from httpLink, `{ opList }` from the batch links. */
export type HeadersOptions = { op: Operation } | { opList: readonly Operation[] };

/** The app's own headers: an object, or a function of the link's options, as the HTTP links accept. */
export type AppHeaders<TOpts> = HTTPHeaders | ((opts: TOpts) => HTTPHeaders | Promise<HTTPHeaders>);

/** The headers that carry the keys `idempotencyLink` put in each operation's `context.idempotencyKey`. */
export function idempotencyKeyHeaders(opts: HeadersOptions): Record<string, string> {
  const ops = 'opList' in opts ? opts.opList : [opts.op];
  if (ops.length === 1) {
    const op = ops[0]!;
    recordBatchIndex(op.context, 0);
    const key = keyOf(op);
    return key !== undefined ? { [KEY_HEADER]: encodeKeyHeader(key) } : {};
  }
  const keys = new Map<number, string>();
  ops.forEach((op, index) => {
    recordBatchIndex(op.context, index);
    const key = keyOf(op);
    if (key !== undefined) keys.set(index, key);
  });
  return keys.size > 0 ? { [KEYS_HEADER]: encodeKeysHeader(keys) } : {};
}

/** A mutation's key; a query or subscription has none, whatever its context holds (only mutations are keyed). */
function keyOf(op: Operation): string | undefined {
  const key = op.context.idempotencyKey;
  return op.type === 'mutation' && typeof key === 'string' ? key : undefined;
}

/**
 * Drop-in `headers` for `httpLink`, `httpBatchLink` and `httpBatchStreamLink`:
 * one operation (or a batch of one) sends `Idempotency-Key: "<key>"`, a larger batch sends
 * `Idempotency-Keys: b0="…", b2="…"` (an SF Dictionary keyed by position in the batch).
 *
 * With headers of your own, compose: `headers: idempotencyHeaders.with(({ opList }) => ({ authorization }))`.
 */
export const idempotencyHeaders: typeof idempotencyKeyHeaders & {
  /**
   * Your headers plus the idempotency headers. Yours may be an object or a (sync or async) function of the
   * link's options; when both set an `Idempotency-Key(s)` header, the link's key wins.
   */
  with<TOpts extends HeadersOptions>(app: AppHeaders<TOpts>): (opts: TOpts) => Promise<Record<string, string>>;
} = Object.assign((opts: HeadersOptions) => idempotencyKeyHeaders(opts), {
  with<TOpts extends HeadersOptions>(app: AppHeaders<TOpts>) {
    return async (opts: TOpts) => {
      const own = typeof app === 'function' ? await app(opts) : app;
      const merged = toRecord(own);
      const ours = idempotencyKeyHeaders(opts);
      // Header names are case-insensitive: drop any spelling of ours the app also set.
      for (const name of Object.keys(merged)) {
        if (name.toLowerCase() === 'idempotency-key' || name.toLowerCase() === 'idempotency-keys') delete merged[name];
      }
      return Object.assign(merged, ours);
    };
  },
});

function toRecord(headers: HTTPHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  const entries: Iterable<[string, string | string[] | undefined]> =
    Symbol.iterator in headers
      ? (headers as Iterable<[string, string]>)
      : Object.entries(headers as Record<string, string | string[] | undefined>);
  for (const [name, value] of entries) {
    if (value === undefined) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

import { IdempotencyError } from '../errors/idempotency-error.js';
import { keyProblem } from '../wire/parse-idempotency-key.js';
import type { Runtime } from './call.js';
import { type CallSource, formOf, headerSource } from './call-source.js';

/** Options of `idempotency.fromInput()`: the key, the fingerprint, or both, from the procedure's parsed input. */
export interface FromInputOptions<TContext, TInput> {
  /**
   * The call's key, from its parsed input (`({ input }) => input.orderId`) instead of a header: every call with
   * that value is one operation, whichever client sent it; an `Idempotency-Key` header is then ignored. Checked as a
   * header key (1–255 characters of visible ASCII, else 400 `key_invalid`; `undefined`: 400 `key_missing`, or no
   * idempotency with `required: false`) and still scoped by `scope`. Keys share the scope's key space with every
   * other procedure, and the path is fingerprinted: prefix a key that another procedure could also take
   * (`` `place:${input.orderId}` ``). Default: the headers.
   */
  key?: (opts: { ctx: TContext; input: TInput }) => string | undefined;
  /**
   * What the fingerprint covers besides the path: a part of the parsed input (`({ input }) => ({ amount: input.amount
   * })`). A retry whose fields outside it changed (a request timestamp) replays the stored outcome instead of a 422;
   * so leave out only what may differ between a call and its replay without changing what the call means. Encoded
   * like the whole input (keys sorted, Date, BigInt, Map and Set tagged). Default: the whole raw input.
   */
  fingerprint?: (opts: { ctx: TContext; input: TInput }) => unknown;
}

/** Checks the options once, when the middleware is made. */
export function checkFromInput(opts: FromInputOptions<unknown, unknown>): FromInputOptions<unknown, unknown> {
  if (!opts || typeof opts !== 'object') throw new TypeError('idempotency.fromInput: pass `{ key?, fingerprint? }`');
  for (const name of ['key', 'fingerprint'] as const) {
    if (opts[name] !== undefined && typeof opts[name] !== 'function') {
      throw new TypeError(`idempotency.fromInput: \`${name}\` must be a function \`({ input, ctx }) => …\``);
    }
  }
  if (!opts.key && !opts.fingerprint) {
    throw new TypeError('idempotency.fromInput: pass `key`, `fingerprint` or both (else use idempotency.middleware)');
  }
  return opts;
}

/** Keys and fingerprints from the typed input, each falling back to the header source's when not given. */
export function inputSource(rt: Runtime, opts: FromInputOptions<unknown, unknown>): CallSource {
  const headers = headerSource(rt);
  const { key, fingerprint } = opts;
  return {
    key: key
      ? ({ ctx, input, path, batchIndex }) => {
          const value = key({ ctx, input });
          if (value === undefined) return undefined;
          const problem = keyProblem(value);
          if (problem !== undefined) {
            throw new IdempotencyError(
              'key_invalid',
              `The idempotency key taken from the input of ${path} is invalid: ${problem}. It must be 1-255 ` +
                'characters of visible ASCII: send another value, or change what `fromInput`’s `key` returns.',
            );
          }
          return { key: value, form: formOf(batchIndex), fromInput: true };
        }
      : headers.key,
    missing: key
      ? (path) =>
          `${path} takes its idempotency key from its input, and this input has none: send the field its key is ` +
          'read from (the same value on every retry). The middleware must come after `.input()`.'
      : headers.missing,
    fingerprinted: fingerprint ? ({ ctx, input }) => fingerprint({ ctx, input }) : headers.fingerprinted,
  };
}

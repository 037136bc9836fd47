import type { Kysely } from 'kysely';
import type { StoreErrorsOption } from './errors/error-policy.js';
import { DEFAULT_STORED_ERROR_CODES } from './errors/error-policy.js';
import type { IdempotencyEvent } from './events.js';
import { DEFAULT_ENCODE_LIMITS, type EncodeLimits } from './fingerprint/canonical-encode.js';
import { defaultSerializer, type Serializer } from './serialize/serializer.js';
import type { DialectName } from './store/dialects/dialect.js';
import type { PgPoolLike } from './store/dialects/postgres/pg-pool-like.js';
import type { PostgresOptions } from './store/dialects/postgres/postgres-options.js';
import { parseTableName, type TableName } from './store/table-name.js';
import type { OpenTelemetryApi } from './telemetry/otel-api.js';

/** Which way the handler's effects are protected; see the README's "Modes". */
export type IdempotencyMode = 'transaction' | 'lease';

/** Options of {@link createIdempotency}. */
export interface IdempotencyOptions<TContext, DB, TRequired extends boolean = true> {
  /**
   * The Kysely the keys are stored with: Postgres (`pg`, PGlite), MySQL / MariaDB (`mysql2`) or SQLite
   * (better-sqlite3, libSQL). Its `DB` types `ctx.idempotency.db`.
   */
  db: Kysely<DB>;
  /**
   * The SQL dialect of `db`, for a third-party Kysely dialect whose adapter is not Kysely's own.
   * Default: learned from `db`.
   */
  dialect?: DialectName;
  /**
   * The namespace keys live in: keys never collide across scopes. Annotate `ctx` here
   * (`({ ctx }: { ctx: Context }) => …`): the middleware then only fits procedures whose context has that shape.
   * Prefix it when one table serves several kinds of principal (`user:5`, `tenant:5`).
   */
  scope: (opts: { ctx: TContext }) => string;
  /**
   * Reads the key yourself instead of from the `Idempotency-Key` / `Idempotency-Keys` headers.
   * Return `undefined` for "no key". Default: the headers, found on `ctx.req` or `ctx.headers`.
   */
  key?: (opts: { ctx: TContext; batchIndex: number }) => string | undefined;
  /**
   * `'transaction'` (default): claim, handler and stored result commit in one transaction; for effects that live in
   * this database. `'lease'`: the claim commits first with a renewable lease; for handlers that call the outside world.
   */
  mode?: IdempotencyMode;
  /** Ms a key is kept, counted from its claim; a row whose lease is live never expires. Default 86 400 000 (24 h). */
  ttl?: number;
  /**
   * Lease mode: ms a claim is owned. Renewed while the handler runs, so only a dead holder's claim expires. Keep it
   * short enough that a client's `maxElapsedMs` outlasts `wait` + `lease`. Default 10 000.
   */
  lease?: number;
  /**
   * Ms a duplicate waits for the in-flight original before answering 409 `in_progress`. `0` answers 409 at once.
   * Bounds only the wait for the key, never the handler's own locks. Default 5 000.
   */
  wait?: number;
  /**
   * A call without a key is 400 `key_missing`; `false` lets it run without idempotency (`ctx.idempotency` is `null`).
   * Default `true`.
   */
  required?: TRequired;
  /** Table name, schema-qualified allowed (`'app.idempotency_keys'`). Default `'idempotency_keys'`. */
  table?: string;
  /**
   * How results are stored and replayed. Default: keeps Date, Map, Set, BigInt and undefined; pass `superjson`
   * itself to cover everything a superjson router returns.
   */
  serializer?: Serializer;
  /**
   * Which thrown errors are stored and replayed (their partial writes rolled back): tRPC codes, or a predicate.
   * Default: BAD_REQUEST, PAYMENT_REQUIRED, FORBIDDEN, NOT_FOUND, CONFLICT, PRECONDITION_FAILED, PAYLOAD_TOO_LARGE,
   * UNPROCESSABLE_CONTENT. Everything else releases the key so a retry runs again.
   */
  storeErrors?: StoreErrorsOption;
  /**
   * A larger serialized result is not stored: the call fails with `response_too_large`, writes rolled back.
   * Default 1 MiB.
   */
  maxResponseBytes?: number;
  /**
   * A larger input is refused with 413 PAYLOAD_TOO_LARGE before the claim: its size as the fingerprint reads it
   * (characters of text, bytes of files). Bounds the memory and CPU a hostile input costs. Default 16 MiB.
   */
  maxInputBytes?: number;
  /**
   * An input nested deeper (arrays, objects, Maps, Sets) is refused with 400 BAD_REQUEST before the claim, instead
   * of overflowing the stack. Default 100.
   */
  maxInputDepth?: number;
  /** Called once per outcome (executed, replayed, waited, conflict, mismatch, released, taken_over); must not throw. */
  onEvent?: (event: IdempotencyEvent) => void;
  /**
   * OpenTelemetry: pass the `@opentelemetry/api` module (`import * as otel from '@opentelemetry/api'`) for spans and
   * metrics of each call (docs/telemetry.md). The package never imports it itself: without this option nothing of
   * OpenTelemetry runs or loads. Default: none.
   */
  telemetry?: OpenTelemetryApi;
  /** Options of the Postgres dialect: `pool`, the raw `pg` `Pool` behind `db`, enables the fast path. */
  postgres?: PostgresOptions;
  /**
   * @deprecated Pass it as `postgres: { pool }`; this spelling still works and means the same. The raw `pg` `Pool`
   * behind `db`, for the fast path.
   */
  pool?: PgPoolLike;
  /**
   * In-process cache of completed results, so a replay costs no database round trip. `false` disables it.
   * Default `{ maxEntries: 10 000, maxBytes: 64 MiB }`.
   */
  cache?: false | { maxEntries?: number; maxBytes?: number };
}

/** Options with every default applied, validated once. */
export interface ResolvedOptions<TContext> {
  scope: (opts: { ctx: TContext }) => string;
  key: ((opts: { ctx: TContext; batchIndex: number }) => string | undefined) | undefined;
  mode: IdempotencyMode;
  ttl: number;
  lease: number;
  wait: number;
  required: boolean;
  table: TableName;
  serializer: Serializer;
  storeErrors: StoreErrorsOption;
  maxResponseBytes: number;
  /** `maxInputDepth` and `maxInputBytes`, as the fingerprint takes them. */
  inputLimits: EncodeLimits;
  onEvent: ((event: IdempotencyEvent) => void) | undefined;
  telemetry: OpenTelemetryApi | undefined;
  /** The Postgres dialect's options, `pool` from `postgres.pool` or the deprecated top-level `pool`. */
  postgres: { pool: PgPoolLike | undefined };
  dialect: DialectName | undefined;
  cache: false | { maxEntries: number; maxBytes: number };
}

export const DEFAULTS = {
  mode: 'transaction',
  ttl: 86_400_000,
  lease: 10_000,
  wait: 5_000,
  required: true,
  table: 'idempotency_keys',
  maxResponseBytes: 1_048_576,
  maxInputBytes: DEFAULT_ENCODE_LIMITS.maxBytes,
  maxInputDepth: DEFAULT_ENCODE_LIMITS.maxDepth,
  cacheEntries: 10_000,
  cacheBytes: 64 * 1_048_576,
} as const;

export function resolveOptions<TContext, DB>(
  opts: IdempotencyOptions<TContext, DB, boolean>,
): ResolvedOptions<TContext> {
  if (!opts || typeof opts !== 'object') throw new TypeError('createIdempotency: pass an options object');
  if (!opts.db || typeof (opts.db as { getExecutor?: unknown }).getExecutor !== 'function') {
    throw new TypeError('createIdempotency: `db` must be a Kysely instance');
  }
  if (typeof opts.scope !== 'function') {
    throw new TypeError('createIdempotency: `scope` must be a function `({ ctx }) => string`');
  }
  if (opts.key !== undefined && typeof opts.key !== 'function') {
    throw new TypeError('createIdempotency: `key` must be a function `({ ctx }) => string | undefined`');
  }
  const mode = opts.mode ?? DEFAULTS.mode;
  if (mode !== 'transaction' && mode !== 'lease') {
    throw new TypeError(`createIdempotency: \`mode\` must be 'transaction' or 'lease', got ${String(mode)}`);
  }
  const cache = opts.cache ?? {};
  return {
    scope: opts.scope,
    key: opts.key,
    mode,
    ttl: positiveInt('ttl', opts.ttl ?? DEFAULTS.ttl, 1),
    lease: positiveInt('lease', opts.lease ?? DEFAULTS.lease, 100, MAX_TIMER_MS),
    wait: positiveInt('wait', opts.wait ?? DEFAULTS.wait, 0, MAX_TIMER_MS),
    required: opts.required ?? DEFAULTS.required,
    table: parseTableName(opts.table ?? DEFAULTS.table),
    serializer: checkSerializer(opts.serializer ?? defaultSerializer),
    storeErrors: opts.storeErrors ?? DEFAULT_STORED_ERROR_CODES,
    maxResponseBytes: positiveInt('maxResponseBytes', opts.maxResponseBytes ?? DEFAULTS.maxResponseBytes, 1),
    inputLimits: {
      maxBytes: positiveInt('maxInputBytes', opts.maxInputBytes ?? DEFAULTS.maxInputBytes, 1),
      maxDepth: positiveInt('maxInputDepth', opts.maxInputDepth ?? DEFAULTS.maxInputDepth, 1),
    },
    onEvent: opts.onEvent,
    telemetry: checkTelemetry(opts.telemetry),
    postgres: { pool: resolvePool(opts.postgres?.pool, opts.pool) },
    dialect: checkDialect(opts.dialect),
    cache:
      cache === false
        ? false
        : {
            maxEntries: positiveInt('cache.maxEntries', cache.maxEntries ?? DEFAULTS.cacheEntries, 1),
            maxBytes: positiveInt('cache.maxBytes', cache.maxBytes ?? DEFAULTS.cacheBytes, 1),
          },
  };
}

/**
 * The longest timer Node runs as asked: a longer (or non-finite) delay fires after 1 ms. `wait` and `lease` become
 * timers, so larger values are refused rather than clamped: a typo must not turn into "409 at once". `ttl` never
 * becomes a timer (an interval in SQL, a deadline compared with performance.now()): any safe integer is kept.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

function positiveInt(name: string, value: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    const range = max === MAX_TIMER_MS ? ` and ≤ ${max} (2^31 − 1, the longest timer Node runs as asked)` : '';
    throw new RangeError(
      `createIdempotency: \`${name}\` must be an integer ≥ ${min}${range} (ms or bytes), got ${String(value)}`,
    );
  }
  return value;
}

function checkSerializer(serializer: Serializer): Serializer {
  if (typeof serializer?.serialize !== 'function' || typeof serializer.deserialize !== 'function') {
    throw new TypeError('createIdempotency: `serializer` must have `serialize` and `deserialize` (superjson fits)');
  }
  return serializer;
}

function checkDialect(dialect: DialectName | undefined): DialectName | undefined {
  if (dialect !== undefined && dialect !== 'postgres' && dialect !== 'mysql' && dialect !== 'sqlite') {
    throw new TypeError(
      `createIdempotency: \`dialect\` must be 'postgres', 'mysql' or 'sqlite', got ${String(dialect)}`,
    );
  }
  return dialect;
}

function checkTelemetry(api: OpenTelemetryApi | undefined): OpenTelemetryApi | undefined {
  if (
    api !== undefined &&
    (typeof api?.trace?.getTracer !== 'function' || typeof api.metrics?.getMeter !== 'function')
  ) {
    throw new TypeError(
      'createIdempotency: `telemetry` must be the @opentelemetry/api module ' +
        "(import * as otel from '@opentelemetry/api')",
    );
  }
  return api;
}

/** `postgres.pool`, or the deprecated top-level `pool`; both may be given only as the same pool. */
function resolvePool(pool: PgPoolLike | undefined, deprecated: PgPoolLike | undefined): PgPoolLike | undefined {
  if (pool !== undefined && deprecated !== undefined && pool !== deprecated) {
    throw new TypeError('createIdempotency: pass the `pg` Pool once, as `postgres.pool` (`pool` is its old spelling)');
  }
  const name = pool !== undefined ? '`postgres.pool`' : '`pool`';
  const chosen = pool ?? deprecated;
  if (chosen !== undefined && typeof chosen?.connect !== 'function') {
    throw new TypeError(`createIdempotency: ${name} must be a \`pg\` Pool (an object with \`connect()\`)`);
  }
  return chosen;
}

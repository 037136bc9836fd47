import { Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createIdempotency } from './index.js';

/** A Kysely that is never connected: option checks happen before any query. */
const pool = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none', max: 1 });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
afterAll(() => db.destroy());

const make = (opts: Record<string, unknown>) => createIdempotency({ db, scope: () => 's', ...opts });

/** Node turns a timer above 2^31 − 1 ms (or a non-finite one) into a 1 ms timer: such values must never get there. */
describe('options that become timers', () => {
  const MAX_TIMER_MS = 2 ** 31 - 1;

  for (const name of ['wait', 'lease'] as const) {
    it(`refuses \`${name}\` above 2^31 − 1 ms or non-finite, naming it`, () => {
      for (const value of [MAX_TIMER_MS + 1, 2 ** 40, Number.POSITIVE_INFINITY, Number.NaN]) {
        expect(() => make({ mode: 'lease', [name]: value })).toThrow(new RegExp(`\`${name}\``));
      }
      expect(() => make({ mode: 'lease', [name]: MAX_TIMER_MS })).not.toThrow();
    });
  }

  it('refuses a non-finite `ttl`, and keeps a long one (it never becomes a timer)', () => {
    for (const value of [Number.POSITIVE_INFINITY, Number.NaN, -1, 0.5]) {
      expect(() => make({ ttl: value })).toThrow(/`ttl`/);
    }
    // Ten years: stored as an interval in Postgres and counted on the monotonic clock, never a setTimeout.
    expect(() => make({ ttl: 10 * 365 * 86_400_000 })).not.toThrow();
  });
});

describe('fromInput options', () => {
  it('refuses options without key or fingerprint, or with one that is not a function, naming it', () => {
    const idempotency = make({});
    expect(() => idempotency.fromInput({})).toThrow(/pass `key`, `fingerprint` or both/);
    expect(() => idempotency.fromInput({ key: 'orderId' as never })).toThrow(/`key` must be a function/);
    expect(() => idempotency.fromInput({ fingerprint: ['amount'] as never })).toThrow(/`fingerprint` must be/);
    expect(() => idempotency.fromInput({ key: ({ input }: { input: { id: string } }) => input.id })).not.toThrow();
  });
});

/** The pg Pool is a Postgres option (`postgres: { pool }`); the top-level `pool` is its deprecated spelling. */
describe('the Postgres pool option', () => {
  it('takes the pool as `postgres.pool`, checked like `pool`, and the deprecated `pool` as before', () => {
    expect(() => make({ postgres: { pool } })).not.toThrow();
    expect(() => make({ postgres: { pool: {} } })).toThrow(/`postgres\.pool` must be a `pg` Pool/);
    expect(() => make({ pool })).not.toThrow();
    expect(() => make({ pool: {} })).toThrow(/`pool` must be a `pg` Pool/);
    expect(() => make({ pool, postgres: { pool } })).not.toThrow();
  });

  it('refuses two different pools', () => {
    const other = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none', max: 1 });
    expect(() => make({ pool, postgres: { pool: other } })).toThrow(/pass the `pg` Pool once/);
  });

  it('refuses a pg Pool on another dialect, under either name', async () => {
    const database = async () => Promise.reject(new Error('never opened: options are checked first'));
    const sqlite = new Kysely<unknown>({ dialect: new SqliteDialect({ database }) });
    for (const opts of [{ pool }, { postgres: { pool } }]) {
      expect(() => createIdempotency({ db: sqlite, scope: () => 's', ...opts })).toThrow(/does not apply to sqlite/);
    }
    await sqlite.destroy();
  });
});

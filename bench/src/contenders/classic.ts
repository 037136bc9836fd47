import { TRPCError } from '@trpc/server';
import { middlewareMarker } from '@trpc/server/unstable-core-do-not-import';
import type { Kysely } from 'kysely';
import type pg from 'pg';
import { type BenchContext, idempotencyKeyOf } from '../server/headers.ts';
import { t } from '../server/trpc.ts';
import { jsonFingerprint } from './fingerprint.ts';

interface ClassicRow {
  fingerprint: string;
  status: string;
  response: string | null;
}

/** The four statements of the classic pattern, each its own autocommit round trip. */
interface ClassicStore {
  /** true when this call inserted the key (it owns it). */
  claim(key: string, fingerprint: string): Promise<boolean>;
  read(key: string): Promise<ClassicRow | undefined>;
  complete(key: string, response: string): Promise<void>;
  release(key: string): Promise<void>;
}

/**
 * The pattern most blog posts show: claim the key with INSERT … ON CONFLICT DO NOTHING (commit 1), run the
 * handler in its own transaction (commit 2), then mark the key done with a separate UPDATE (commit 3).
 * Nothing is shared between the three, so a crash between 2 and 3 leaves a key stuck in progress with the
 * effect applied: the trade-off ours avoids.
 */
function classicPattern(store: ClassicStore) {
  return t.middleware(async ({ ctx, path, getRawInput, next }) => {
    const key = idempotencyKeyOf(ctx as BenchContext);
    if (!key) throw new TRPCError({ code: 'BAD_REQUEST', message: 'Idempotency-Key missing' });
    const fingerprint = jsonFingerprint(path, await getRawInput());
    if (!(await store.claim(key, fingerprint))) {
      const row = await store.read(key);
      if (row && row.fingerprint !== fingerprint) throw new TRPCError({ code: 'UNPROCESSABLE_CONTENT' });
      if (row?.status !== 'done') throw new TRPCError({ code: 'CONFLICT', message: 'in progress' });
      return { ok: true as const, data: JSON.parse(row.response ?? 'null'), marker: middlewareMarker };
    }
    const result = await next();
    if (result.ok) await store.complete(key, JSON.stringify(result.data));
    else await store.release(key);
    return result;
  });
}

/** Classic with its own statements on the raw `pg` pool (the handler still runs through Kysely). */
export function classicMiddleware(pool: pg.Pool) {
  return classicPattern({
    claim: async (key, fingerprint) =>
      (
        await pool.query(
          `INSERT INTO classic_keys (key, fingerprint, status) VALUES ($1, $2, 'in_progress')
       ON CONFLICT (key) DO NOTHING RETURNING key`,
          [key, fingerprint],
        )
      ).rowCount !== 0,
    read: async (key) =>
      (await pool.query('SELECT fingerprint, status, response FROM classic_keys WHERE key = $1', [key])).rows[0] as
        | ClassicRow
        | undefined,
    complete: async (key, response) => {
      await pool.query(`UPDATE classic_keys SET status = 'done', response = $2 WHERE key = $1`, [key, response]);
    },
    release: async (key) => {
      await pool.query('DELETE FROM classic_keys WHERE key = $1', [key]);
    },
  });
}

/**
 * Classic written the way a Kysely app would write it: every statement of the pattern built and run through
 * Kysely, like ours on its general path and like the handler. The like-for-like reference for ours.
 */
export function classicKyselyMiddleware(db: Kysely<any>) {
  return classicPattern({
    claim: async (key, fingerprint) =>
      (await db
        .insertInto('classic_keys')
        .values({ key, fingerprint, status: 'in_progress' })
        .onConflict((oc) => oc.column('key').doNothing())
        .returning('key')
        .executeTakeFirst()) !== undefined,
    read: (key) =>
      db
        .selectFrom('classic_keys')
        .select(['fingerprint', 'status', 'response'])
        .where('key', '=', key)
        .executeTakeFirst() as Promise<ClassicRow | undefined>,
    complete: async (key, response) => {
      await db.updateTable('classic_keys').set({ status: 'done', response }).where('key', '=', key).execute();
    },
    release: async (key) => {
      await db.deleteFrom('classic_keys').where('key', '=', key).execute();
    },
  });
}

import { TRPCError } from '@trpc/server';
import { middlewareMarker } from '@trpc/server/unstable-core-do-not-import';
import type pg from 'pg';
import { type BenchContext, idempotencyKeyOf } from '../server/headers.ts';
import { t } from '../server/trpc.ts';
import { jsonFingerprint } from './fingerprint.ts';

/**
 * The pattern most blog posts show: claim the key with INSERT … ON CONFLICT DO NOTHING (commit 1), run the
 * handler in its own transaction (commit 2), then mark the key done with a separate UPDATE (commit 3).
 * Nothing is shared between the three, so a crash between 2 and 3 leaves a key stuck in progress with the
 * effect applied: the trade-off ours avoids.
 */
export function classicMiddleware(pool: pg.Pool) {
  return t.middleware(async ({ ctx, path, getRawInput, next }) => {
    const key = idempotencyKeyOf(ctx as BenchContext);
    if (!key) throw new TRPCError({ code: 'BAD_REQUEST', message: 'Idempotency-Key missing' });
    const fingerprint = jsonFingerprint(path, await getRawInput());
    const claim = await pool.query(
      `INSERT INTO classic_keys (key, fingerprint, status) VALUES ($1, $2, 'in_progress')
       ON CONFLICT (key) DO NOTHING RETURNING key`,
      [key, fingerprint],
    );
    if (claim.rowCount === 0) {
      const { rows } = await pool.query('SELECT fingerprint, status, response FROM classic_keys WHERE key = $1', [key]);
      const row = rows[0] as { fingerprint: string; status: string; response: string | null } | undefined;
      if (row && row.fingerprint !== fingerprint) throw new TRPCError({ code: 'UNPROCESSABLE_CONTENT' });
      if (row?.status !== 'done') throw new TRPCError({ code: 'CONFLICT', message: 'in progress' });
      return { ok: true as const, data: JSON.parse(row.response ?? 'null'), marker: middlewareMarker };
    }
    const result = await next();
    if (result.ok) {
      await pool.query(`UPDATE classic_keys SET status = 'done', response = $2 WHERE key = $1`, [
        key,
        JSON.stringify(result.data),
      ]);
    } else {
      await pool.query('DELETE FROM classic_keys WHERE key = $1', [key]);
    }
    return result;
  });
}

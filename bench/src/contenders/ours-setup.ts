import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { Kysely } from 'kysely';

/** Whether the built server package declares the optional raw `pool` option (its fast path). */
export async function supportsPoolOption(): Promise<boolean> {
  const entry = createRequire(import.meta.url).resolve('@trpc-idempotency/server');
  const dir = entry.slice(0, entry.lastIndexOf('/'));
  const { readdir } = await import('node:fs/promises');
  const files = (await readdir(dir, { recursive: true })).filter((f) => String(f).endsWith('.d.ts'));
  for (const file of files) {
    if (/\bpool\?:/.test(await readFile(`${dir}/${file}`, 'utf8'))) return true;
  }
  return false;
}

/** Creates ours' table (default, or a named one for the scaling and purge scenarios). */
export async function migrateOurs(db: Kysely<any>, table: string | undefined): Promise<void> {
  const { createIdempotency } = await import('@trpc-idempotency/server');
  const options: Record<string, unknown> = { db, scope: () => 'bench' };
  if (table) options.table = table;
  await (createIdempotency as (o: unknown) => { migrate(): Promise<void> })(options).migrate();
}

import { createTestDatabase, type TestDatabase } from '@trpc-idempotency/test-db';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type RunningDemo, runStorm, startDemo } from './support/demoServer';

describe('the demo on Postgres (DATABASE_URL)', () => {
  let tdb: TestDatabase;
  let demo: RunningDemo;

  beforeAll(async () => {
    tdb = await createTestDatabase(inject('pgAdminUrl'));
    demo = await startDemo({ databaseUrl: tdb.url });
  });

  afterAll(async () => {
    demo?.stop();
    await tdb?.drop();
  });

  it('migrates a fresh database on start and says where the ledger lives', async () => {
    const tables = await sql<{ name: string }>`select table_name as name from information_schema.tables
      where table_schema = 'public' order by 1`.execute(tdb.db);
    expect(tables.rows.map((row) => row.name)).toEqual(expect.arrayContaining(['idempotency_keys', 'payments']));
    const response = await fetch(
      `${demo.baseUrl}/api/trpc/payments.ledger?input=${encodeURIComponent('{"json":{"limit":1}}')}`,
    );
    expect(await response.text()).toContain('Postgres (postgres');
  });

  it('passes the storm, and the table itself holds one row per key', async () => {
    const storm = runStorm(demo.baseUrl, ['--payments', '80', '--clients', '12']);
    expect(storm.exitCode, storm.output).toBe(0);
    expect(storm.table.get('ledger rows'), storm.output).toBe(80);
    expect(storm.table.get('duplicates (rows sharing a key)'), storm.output).toBe(0);
    // Checked in the database directly, not through the app's own ledger query.
    const counts = await sql<{ rows: number; keys: number }>`select count(*)::int as rows,
      count(distinct idempotency_key)::int as keys from payments`.execute(tdb.db);
    expect(counts.rows[0]).toEqual({ rows: 80, keys: 80 });
  });
});

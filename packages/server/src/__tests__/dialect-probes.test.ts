import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DialectBackend, openDialectBackend } from './dialect-backends.js';
import { sleep } from './harness.js';

// The suites poll idleInTransaction() and lockWaiters() every 50 ms (expect.poll): on MariaDB they must read
// InnoDB's transactions as they are, not information_schema.innodb_trx, a copy refreshed only after 100 ms unread.
describe('MariaDB probes of other connections', () => {
  let backend: DialectBackend;
  beforeAll(async () => {
    backend = await openDialectBackend('mariadb');
    await backend.query(`INSERT INTO payments (user_id, amount) VALUES ('probe', 1)`);
  });
  afterAll(() => backend?.close());

  it('see an idle open transaction and a lock waiter, and not once they end, however often they look', async () => {
    const holder = backend.another();
    const waiter = backend.another();
    let waiting: Promise<unknown> | undefined;
    await holder.db.connection().execute(async (c) => {
      await sql`START TRANSACTION`.execute(c);
      await sql`UPDATE payments SET amount = 2 WHERE user_id = 'probe'`.execute(c);
      expect([await backend.idleInTransaction(), await backend.lockWaiters()]).toEqual([1, 0]);
      waiting = waiter.db
        .transaction()
        .execute((trx) => sql`UPDATE payments SET amount = 3 WHERE user_id = 'probe'`.execute(trx));
      await expect.poll(() => backend.lockWaiters()).toBe(1);
      expect(await backend.idleInTransaction()).toBe(1);
      await sql`COMMIT`.execute(c);
    });
    await waiting;
    // Looked at again at once and every 20 ms: a stale copy would still list both.
    for (let i = 0; i < 5; i++) {
      expect([await backend.idleInTransaction(), await backend.lockWaiters()]).toEqual([0, 0]);
      await sleep(20);
    }
  });
});

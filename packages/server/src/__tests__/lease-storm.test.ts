import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDialectApp } from './dialect-app.js';
import { DIALECT_BACKENDS, type DialectBackend, openDialectBackend } from './dialect-backends.js';

/**
 * Found by an outside review of the built packages: with a short lease and concurrent duplicates on several
 * instances, and no fault at all, live holders were fenced off and their calls run again (2–10 runs per key).
 * Three instances: pg and MariaDB three pools, SQLite and libSQL three connections to one WAL file; PGlite is one
 * in-process database, so its three apps share it.
 */
describe.each(DIALECT_BACKENDS)('a lease-mode storm on three instances (%s)', (name) => {
  let backend: DialectBackend;
  beforeAll(async () => {
    backend = await openDialectBackend(name);
    await makeDialectApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());

  it('runs each key once with a 100 ms lease, 4 keys × 15 concurrent duplicates and 500 ms handlers', async () => {
    const opts = { mode: 'lease', lease: 100, wait: 5_000 } as const;
    const instance = () => (name === 'pglite' ? backend : backend.another());
    const apps = [makeDialectApp(backend, opts), makeDialectApp(instance(), opts), makeDialectApp(instance(), opts)];
    for (const app of apps) app.control.delayMs = 500;
    const keys = ['s1', 's2', 's3', 's4'].map((k) => `${k}-${Date.now().toString(36)}`);
    const calls = Array.from({ length: 60 }, (_, i) => {
      const key = keys[i % keys.length]!;
      const app = apps[i % apps.length]!;
      return app
        .caller(key, 'storm')
        .payments.create({ amount: 1 + (i % keys.length) })
        .then(
          (value) => ({ key, value }),
          (error: unknown) => ({ key, error: (error as { code?: string }).code ?? String(error) }),
        );
    });
    const answers = await Promise.all(calls);
    const runs = apps.reduce((n, app) => n + app.control.runs, 0);
    const failures = answers.filter((a) => 'error' in a);
    expect({ runs, failures }).toEqual({ runs: keys.length, failures: [] });
    for (const key of keys) {
      const values = answers.filter((a) => a.key === key).map((a) => JSON.stringify((a as { value: unknown }).value));
      expect(new Set(values).size).toBe(1);
    }
    const rows = await backend.query<{ n: unknown }>(`SELECT count(*) AS n FROM payments WHERE user_id = 'storm'`);
    expect(Number(rows[0]?.n)).toBe(keys.length);
  });
});

import { connect } from 'node:net';
import { createTestDatabase, resolveTestServer, type TestDatabase } from '@trpc-idempotency/test-db';
import pg from 'pg';

const LOCAL = 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * A database of the bench's own, dropped at the end: on the server of DATABASE_URL, else a local Postgres on
 * 127.0.0.1:5432 if one answers, else whatever the shared test-db helper resolves (Testcontainers, embedded).
 */
export async function setupDatabase(): Promise<{ tdb: TestDatabase; stopServer: () => Promise<void> }> {
  let adminUrl = process.env.DATABASE_URL;
  let stopServer = async () => {};
  if (!adminUrl && (await answers(LOCAL))) adminUrl = LOCAL;
  if (!adminUrl) {
    const resolved = await resolveTestServer();
    adminUrl = resolved.adminUrl;
    stopServer = resolved.stop;
  }
  return { tdb: await createTestDatabase(adminUrl, { max: 8 }), stopServer };
}

async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** Whether something listens on the Redis URL's port (the Redis peers are skipped otherwise). */
export function redisAnswers(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port || 6379), timeout: 1000 });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

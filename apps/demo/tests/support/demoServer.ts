import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const demoDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const repoRoot = path.resolve(demoDir, '../..');
const require = createRequire(import.meta.url);
const nextBin = require.resolve('next/dist/bin/next');
const tsxCli = require.resolve('tsx/cli');

function newestMtime(target: string): number {
  if (!existsSync(target)) return 0;
  const stat = statSync(target);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(stat.mtimeMs, ...readdirSync(target).map((entry) => newestMtime(path.join(target, entry))));
}

/**
 * Builds the app unless `.next` is newer than its sources and the packages it uses. Under `npm test`
 * Turborepo has just built it (apps/demo/turbo.json: `test` depends on `build`), so this is a no-op there.
 */
export function ensureBuilt(): void {
  const buildId = path.join(demoDir, '.next', 'BUILD_ID');
  // Set when iterating on the tests themselves while the packages keep being rebuilt.
  if (process.env.TEST_DEMO_REUSE_BUILD === '1' && existsSync(buildId)) return;
  const sources = ['app', 'src', 'instrumentation.ts', 'next.config.ts', 'package.json'].map((entry) =>
    path.join(demoDir, entry),
  );
  sources.push(
    path.join(repoRoot, 'packages/server/dist'),
    path.join(repoRoot, 'packages/client/dist'),
    path.join(repoRoot, 'packages/react/dist'),
  );
  if (existsSync(buildId) && statSync(buildId).mtimeMs > Math.max(...sources.map(newestMtime))) return;
  const build = spawnSync(process.execPath, [nextBin, 'build'], {
    cwd: demoDir,
    encoding: 'utf8',
    env: { ...process.env, NODE_ENV: 'production' },
  });
  if (build.status !== 0) throw new Error(`next build failed:\n${build.stdout}\n${build.stderr}`);
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

async function waitUntilAnswering(url: string, app: ChildProcess, output: () => string, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (app.exitCode !== null) throw new Error(`next start exited with ${app.exitCode}:\n${output()}`);
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`the demo did not answer at ${url} within ${timeoutMs / 1000} s:\n${output()}`);
}

export interface RunningDemo {
  baseUrl: string;
  /** Everything the server printed so far (plus whatever a test appends). */
  log: { text: string };
  stop(): void;
}

/**
 * `next start` on a free port. `database` picks the backend: a PGlite data folder, or a Postgres URL.
 * Resolves once the ledger answers, i.e. the database is open and migrated.
 */
export async function startDemo(database: { dataDir: string } | { databaseUrl: string }): Promise<RunningDemo> {
  ensureBuilt();
  const port = await freePort();
  // Vitest sets NODE_ENV=test; a production build served under it renders the wrong React build.
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_ENV: 'production', NEXT_TELEMETRY_DISABLED: '1' };
  if ('dataDir' in database) {
    env.DEMO_DATA_DIR = database.dataDir;
    delete env.DATABASE_URL;
  } else {
    env.DATABASE_URL = database.databaseUrl;
  }
  const app = spawn(process.execPath, [nextBin, 'start', '-p', String(port), '-H', '127.0.0.1'], {
    cwd: demoDir,
    env,
    detached: true, // its own process group, so stop() ends next and its workers together
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = { text: '' };
  app.stdout?.on('data', (chunk) => (log.text += chunk));
  app.stderr?.on('data', (chunk) => (log.text += chunk));
  const stop = () => {
    if (app.pid && app.exitCode === null) process.kill(-app.pid, 'SIGTERM');
  };
  const baseUrl = `http://127.0.0.1:${port}`;
  try {
    await waitUntilAnswering(baseUrl, app, () => log.text, 60_000);
    // A fresh PGlite folder is initialised on start: seconds, or much longer on a busy machine.
    const ledger = `${baseUrl}/api/trpc/payments.ledger?input=${encodeURIComponent('{"json":{"limit":1}}')}`;
    await waitUntilAnswering(ledger, app, () => log.text, 180_000);
  } catch (error) {
    stop();
    throw error;
  }
  return { baseUrl, log, stop };
}

export interface StormResult {
  exitCode: number | null;
  output: string;
  /** The printed table, label → value. */
  table: Map<string, number>;
}

/** Runs `scripts/storm.ts` (what `npm run demo:storm` runs) against a running demo. */
export function runStorm(baseUrl: string, args: string[]): StormResult {
  const run = spawnSync(process.execPath, [tsxCli, 'scripts/storm.ts', '--url', baseUrl, ...args], {
    cwd: demoDir,
    encoding: 'utf8',
    timeout: 300_000,
  });
  const output = `${run.stdout}\n${run.stderr}`;
  const table = new Map<string, number>();
  for (const match of run.stdout.matchAll(/^\|\s*(.+?)\s*\|\s*([\d.]+)\s*\|$/gm)) {
    table.set(match[1] ?? '', Number(match[2]));
  }
  return { exitCode: run.status, output, table };
}

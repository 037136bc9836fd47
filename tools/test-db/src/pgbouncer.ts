import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { freePort } from './resolve-server.js';

/** A PgBouncer of a test file's own, in transaction pooling mode, in front of the run's Postgres server. */
export interface PgBouncer {
  /** `databaseUrl` (any database on the server) as reached through the bouncer. */
  url(databaseUrl: string): string;
  /** Server connections the bouncer opens per database (and user): keep it below the app's pool. */
  poolSize: number;
  /** Stops the bouncer and deletes its configuration. */
  stop(): Promise<void>;
}

/**
 * Where the `pgbouncer` binary is (`PGBOUNCER`, else the PATH, else Debian's /usr/sbin), or undefined when it is not
 * installed: pooler tests then skip. Under CI (`.ci/run` installs Debian's `pgbouncer` package) a missing bouncer
 * throws, so those tests fail instead of skipping.
 */
export function findPgBouncer(): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/usr/local/sbin', '/opt/homebrew/bin'];
  const candidates = process.env.PGBOUNCER ? [process.env.PGBOUNCER] : dirs.map((d) => join(d, 'pgbouncer'));
  for (const path of candidates) {
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {}
  }
  if (process.env.CI === 'true') {
    throw new Error('pgbouncer is not installed: CI runs the pooler tests (.ci/run installs the pgbouncer package)');
  }
  return undefined;
}

/** The skip message of a pooler test where `findPgBouncer()` found nothing. */
export const PGBOUNCER_MISSING =
  'pgbouncer is not installed (apt-get install pgbouncer, or set PGBOUNCER): the pooler tests are skipped';

/**
 * Starts PgBouncer in transaction pooling mode in front of the server `serverUrl` points at (its user and password
 * are used for every server connection; clients may log in as anyone). A `*` fallback entry serves every database,
 * so each test file's own database is reachable through it. Statements a client prepares with SQL `PREPARE` stay
 * on the server connection it happened to get, as behind any transaction pooler.
 */
export async function startPgBouncer(serverUrl: string, opts: { poolSize?: number } = {}): Promise<PgBouncer> {
  const binary = findPgBouncer();
  if (!binary) throw new Error(PGBOUNCER_MISSING);
  const server = new URL(serverUrl);
  const poolSize = opts.poolSize ?? 2;
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'trpc-idem-pgbouncer-'));
  const target = [
    `host=${server.hostname.replace(/^\[|\]$/g, '')}`,
    `port=${server.port || '5432'}`,
    `user=${decodeURIComponent(server.username || 'postgres')}`,
    server.password ? `password=${decodeURIComponent(server.password)}` : '',
  ].join(' ');
  // PgBouncer refuses to run as root: it then switches to an unprivileged user, who must read the configuration.
  const asRoot = process.getuid?.() === 0;
  const config = `[databases]
* = ${target.trim()}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${port}
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = ${poolSize}
max_client_conn = 500
ignore_startup_parameters = extra_float_digits,options
log_connections = 0
log_disconnections = 0
${asRoot ? `user = ${unprivilegedUser()}\n` : ''}`;
  const file = join(dir, 'pgbouncer.ini');
  await writeFile(file, config, { mode: 0o644 });
  if (asRoot) await chmod(dir, 0o755);
  const child = spawn(binary, [file], { stdio: ['ignore', 'ignore', 'pipe'] });
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  try {
    await listening(child);
  } catch (error) {
    child.kill('SIGKILL');
    process.off('exit', killOnExit);
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    poolSize,
    url(databaseUrl) {
      const url = new URL(databaseUrl);
      url.hostname = '127.0.0.1';
      url.port = String(port);
      return url.toString();
    },
    async stop() {
      process.off('exit', killOnExit);
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGINT');
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Resolves once PgBouncer logs that it listens; rejects with its log when it exits first or takes too long. */
function listening(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    let log = '';
    const timer = setTimeout(() => fail(new Error(`pgbouncer did not start in 10 s:\n${log}`)), 10_000);
    const fail = (error: Error) => {
      clearTimeout(timer);
      reject(error);
    };
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      if (log.length < 20_000) log += chunk;
      if (/LOG listening on/.test(log)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('error', fail);
    child.once('exit', (code) => fail(new Error(`pgbouncer exited (${code}) before listening:\n${log}`)));
  });
}

/** The Postgres packages' system user where it exists, else nobody. */
function unprivilegedUser(): string {
  try {
    return /^postgres:/m.test(readFileSync('/etc/passwd', 'utf8')) ? 'postgres' : 'nobody';
  } catch {
    return 'nobody';
  }
}

import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface ServerProcessOptions {
  /**
   * Database the server uses (`idempotency_keys` and `ledger`): a postgres:// URL, a mysql:// URL (`mariadb`) or
   * a SQLite file path (`sqlite`, `libsql`).
   */
  databaseUrl: string;
  /** Which driver reaches it. Default `'postgres'` (`pg`). */
  dialect?: 'postgres' | 'mariadb' | 'sqlite' | 'libsql';
  /** Port on 127.0.0.1; 0 picks one on first start, then restarts reuse it. Default 0. */
  port?: number;
  /** Idempotency mode. Default `'transaction'`. */
  mode?: 'transaction' | 'lease';
  /** Lease length in ms. Default: the package's. */
  leaseMs?: number;
  /** Duplicate wait in ms. Default: the package's. */
  waitMs?: number;
  /** Default handler delay in ms. Default 0. */
  handlerDelayMs?: number;
  /** Simulated provider base URL. Default none. */
  providerUrl?: string;
  /** Instance name, returned in results. Default `'main'`. */
  instance?: string;
  /** Hand the raw `pg` pool to the middleware (its fast path). Default false: everything through Kysely. */
  rawPool?: boolean;
  /** `pg` pool size. Default 10. */
  poolMax?: number;
  /** `application_name` of its connections, so a test can find and terminate them. Default `'chaos-server'`. */
  appName?: string;
  /** Report every request's `Idempotency-Key` as a `hit` event. Default false. */
  logHits?: boolean;
  /** Shift the server's wall clock (`Date`) by this many ms against the database's. Default 0. */
  clockSkewMs?: number;
  /** `ttl` of the keys in ms. Default: the package's. */
  ttlMs?: number;
}

/** A line the child reported: `listening`, `enter` (a handler started), `idem` (middleware event), `hit`. */
export interface ServerEvent {
  ev: string;
  [field: string]: unknown;
}

const harnessDir = fileURLToPath(new URL('.', import.meta.url));
const testRoot = fileURLToPath(new URL('../..', import.meta.url));
/** Files the child runs: what the entry imports relatively, then the entry (written last: its presence means done). */
const CHILD_SOURCES = ['sql-family.ts', 'payments-app.ts', 'skewed-clock.ts', 'server-main.ts'];
let compiled: Promise<string[]> | undefined;

/**
 * The child's command line. Loading through `tsx` costs seconds per start on a busy machine, and the crash
 * test restarts the server many times: so the entry is transpiled once per test process to plain ESM
 * (under node_modules/.cache, where the workspace's packages resolve), falling back to `tsx` if that fails.
 */
function childArgs(): Promise<string[]> {
  compiled ??= (async () => {
    try {
      const sources = await Promise.all(CHILD_SOURCES.map((f) => readFile(join(harnessDir, f), 'utf8')));
      const hash = createHash('sha256').update(sources.join('\0')).digest('hex').slice(0, 12);
      const outDir = join(testRoot, '..', 'node_modules', '.cache', 'trpc-idempotency-chaos', hash);
      const entry = join(outDir, 'server-main.js');
      if (existsSync(entry)) return [entry];
      await mkdir(outDir, { recursive: true });
      const ts = (await import('typescript')).default;
      await writeFile(join(outDir, 'package.json'), '{ "type": "module" }\n');
      for (const [i, file] of CHILD_SOURCES.entries()) {
        const { outputText } = ts.transpileModule(sources[i] ?? '', {
          fileName: file,
          compilerOptions: {
            module: ts.ModuleKind.ESNext,
            target: ts.ScriptTarget.ES2022,
            rewriteRelativeImportExtensions: true,
            verbatimModuleSyntax: true,
          },
        });
        // Written under a temporary name and renamed: parallel test files may compile at the same time.
        const target = join(outDir, file.replace(/\.ts$/, '.js'));
        await writeFile(`${target}.${process.pid}`, outputText);
        await rename(`${target}.${process.pid}`, target);
      }
      return [entry];
    } catch {
      return ['--import', 'tsx', join(harnessDir, 'server-main.ts')];
    }
  })();
  return compiled;
}

/**
 * The payments server as a child process: start, SIGKILL (mid-handler if you time it on `enter`),
 * restart on the same port. Emits every reported line as `event`.
 */
export class ServerProcess extends EventEmitter<{ event: [ServerEvent]; exit: [number | null, string | null] }> {
  private child: ChildProcess | undefined;
  private currentPort: number;
  private stderr = '';
  starts = 0;
  kills = 0;
  /** Exits nobody asked for (a crash of the server itself), with the stderr tail of each. */
  readonly crashes: { code: number | null; signal: string | null; stderr: string }[] = [];
  private expectingExit = false;

  constructor(readonly opts: ServerProcessOptions) {
    super();
    this.currentPort = opts.port ?? 0;
  }

  get port(): number {
    return this.currentPort;
  }

  get running(): boolean {
    return this.child !== undefined;
  }

  /** Starts the server and resolves once it listens. */
  async start(): Promise<void> {
    if (this.child) throw new Error('server process already running');
    const o = this.opts;
    const env: Record<string, string> = {
      ...(process.env as Record<string, string>),
      DATABASE_URL: o.databaseUrl,
      DIALECT: o.dialect ?? 'postgres',
      PORT: String(this.currentPort),
      MODE: o.mode ?? 'transaction',
      INSTANCE: o.instance ?? 'main',
      APP_NAME: o.appName ?? 'chaos-server',
      LOG_HITS: o.logHits ? '1' : '0',
      RAW_POOL: o.rawPool ? '1' : '0',
    };
    const optional: [string, number | string | undefined][] = [
      ['LEASE_MS', o.leaseMs],
      ['WAIT_MS', o.waitMs],
      ['HANDLER_DELAY_MS', o.handlerDelayMs],
      ['PROVIDER_URL', o.providerUrl],
      ['POOL_MAX', o.poolMax],
      ['CLOCK_SKEW_MS', o.clockSkewMs],
      ['TTL_MS', o.ttlMs],
    ];
    for (const [name, value] of optional) if (value !== undefined) env[name] = String(value);
    const child = spawn(process.execPath, await childArgs(), {
      cwd: testRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.starts++;
    this.stderr = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-4_000);
    });
    let buffered = '';
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      buffered += chunk;
      let nl = buffered.indexOf('\n');
      while (nl >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        nl = buffered.indexOf('\n');
        if (!line.startsWith('{')) continue;
        try {
          this.emit('event', JSON.parse(line) as ServerEvent);
        } catch {
          // A line cut by SIGKILL: nothing to learn from it.
        }
      }
    });
    child.on('exit', (code, signal) => {
      if (this.child === child) this.child = undefined;
      if (!this.expectingExit) this.crashes.push({ code, signal, stderr: this.stderr });
      this.expectingExit = false;
      this.emit('exit', code, signal);
    });
    await new Promise<void>((resolve, reject) => {
      // Generous: three instances starting at once on a busy 2-core machine take a while.
      const timer = setTimeout(() => fail(new Error('server did not listen within 60 s')), 60_000);
      const onEvent = (e: ServerEvent) => {
        if (e.ev !== 'listening') return;
        this.currentPort = Number(e.port);
        cleanup();
        resolve();
      };
      const onExit = (code: number | null) =>
        fail(new Error(`server exited (${code}) before listening:\n${this.stderr}`));
      const cleanup = () => {
        clearTimeout(timer);
        this.off('event', onEvent);
        this.off('exit', onExit);
      };
      const fail = (err: Error) => {
        cleanup();
        reject(err);
      };
      this.on('event', onEvent);
      this.on('exit', onExit);
    });
  }

  /** SIGKILL: no cleanup, no graceful close, open transactions die with their connections. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.kills++;
    this.expectingExit = true;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }

  /** SIGSTOP: the process freezes with its connections open (its timers, renewals included, stop) until `resume`. */
  pause(): void {
    this.child?.kill('SIGSTOP');
  }

  /** SIGCONT after `pause`. */
  resume(): void {
    this.child?.kill('SIGCONT');
  }

  /** Stops the server for good (SIGKILL too: tests need no graceful path). */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.expectingExit = true;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }

  /**
   * Rejects when the server exits without being asked to (it crashed by itself), with its stderr: race a
   * test's traffic against it so a crash fails the test at once instead of at a deadline.
   */
  crashed(): Promise<never> {
    return new Promise((_, reject) => {
      const onExit = () => {
        const crash = this.crashes.at(-1);
        if (!crash || this.crashes.length === seen) return;
        this.off('exit', onExit);
        reject(new Error(`server crashed (code ${crash.code}, signal ${crash.signal}):\n${crash.stderr}`));
      };
      const seen = this.crashes.length;
      this.on('exit', onExit);
    });
  }

  /** The last few KB the server wrote to stderr, for failure messages. */
  get lastStderr(): string {
    return this.stderr;
  }
}

import { type ChildProcess, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { DialectName } from './dialect-databases.ts';

const entry = fileURLToPath(new URL('./dialect-server-main.ts', import.meta.url));
const testRoot = fileURLToPath(new URL('../..', import.meta.url));

export interface DialectServerOptions {
  dialect: DialectName;
  target: string;
  instance?: string;
  mode?: 'transaction' | 'lease';
  waitMs?: number;
  leaseMs?: number;
  handlerDelayMs?: number;
}

/** dialect-server-main.ts as a child process: start, SIGKILL, start again on the same port. */
export class DialectServer extends EventEmitter<{ event: [Record<string, unknown>] }> {
  #child: ChildProcess | undefined;
  #stderr = '';
  port = 0;
  kills = 0;

  constructor(readonly opts: DialectServerOptions) {
    super();
  }

  async start(): Promise<void> {
    const o = this.opts;
    const child = spawn(process.execPath, ['--import', 'tsx', entry], {
      cwd: testRoot,
      env: {
        ...process.env,
        DIALECT: o.dialect,
        TARGET: o.target,
        INSTANCE: o.instance ?? 'main',
        MODE: o.mode ?? 'transaction',
        WAIT_MS: String(o.waitMs ?? ''),
        LEASE_MS: String(o.leaseMs ?? ''),
        HANDLER_DELAY_MS: String(o.handlerDelayMs ?? 0),
        PORT: String(this.port),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.#child = child;
    child.stderr?.setEncoding('utf8').on('data', (c: string) => {
      this.#stderr = (this.#stderr + c).slice(-4000);
    });
    let buffered = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      buffered += chunk;
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        try {
          if (line.startsWith('{')) this.emit('event', JSON.parse(line));
        } catch {
          // A line cut by SIGKILL.
        }
      }
    });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server did not listen within 60 s:\n${this.#stderr}`)), 60_000);
      const onEvent = (e: Record<string, unknown>) => {
        if (e.ev !== 'listening') return;
        this.port = Number(e.port);
        clearTimeout(timer);
        this.off('event', onEvent);
        resolve();
      };
      this.on('event', onEvent);
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`server exited (${code}) before listening:\n${this.#stderr}`));
      });
    });
  }

  /** SIGKILL: open transactions die with the process (SQLite's locks too; MariaDB rolls back). */
  async kill(): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null) return;
    this.kills++;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
    this.#child = undefined;
  }
}

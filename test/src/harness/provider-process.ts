import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Charge } from './payment-provider.ts';

/** PaymentProvider (payment-provider.ts) run as a child process, with its own ledger. */
export class ProviderProcess {
  #child: ChildProcess | undefined;
  #port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.#port}`;
  }

  async start(): Promise<this> {
    const entry = fileURLToPath(new URL('provider-main.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', entry], { stdio: ['ignore', 'pipe', 'inherit'] });
    this.#child = child;
    const lines = createInterface({ input: child.stdout! });
    this.#port = await new Promise<number>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`provider exited with ${code} before it listened`)));
      lines.once('line', (line) => resolve((JSON.parse(line) as { port: number }).port));
    });
    return this;
  }

  /** Every charge the provider carried out, and how many calls it received. */
  async ledger(): Promise<{ charges: Charge[]; calls: number }> {
    return (await fetch(this.url)).json() as Promise<{ charges: Charge[]; calls: number }>;
  }

  async stop(): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }
}

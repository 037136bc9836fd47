import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ServerConfig } from '../contenders/contender-spec.ts';

export interface ServerCounters {
  queries: number;
  /** SQL statements in those round trips (a multi-statement string counts each). */
  statements: number;
  redis: number;
  cpuMicros: number;
}

/** A contender's server running in its own process. */
export interface BenchServer {
  name: string;
  url: string;
  child: ChildProcess;
  /** SQL round trips and Redis commands the server has sent, and its CPU time (µs), since it started. */
  counters(): Promise<ServerCounters>;
  stop(): Promise<void>;
}

/** The `application_name` of a contender's Postgres connections. */
export const backendName = (contender: string) => `bench:${contender}`.slice(0, 63);

const childPath = fileURLToPath(new URL('./child.ts', import.meta.url));

// BENCH_PORT_BASE=43000 keeps the servers on ports 43000-43999 (a shared machine's agreed range); unset, each
// listens on a port the OS picks.
const portBase = Number(process.env.BENCH_PORT_BASE ?? 0);

export async function spawnServer(config: ServerConfig): Promise<BenchServer> {
  if (config.portRange === undefined && portBase > 0) config = { ...config, portRange: [portBase, portBase + 999] };
  const child = fork(childPath, [], {
    // BENCH_CPU_PROF=<dir> writes a V8 CPU profile per server (read them with src/profile-summary.ts).
    execArgv: [
      '--import',
      'tsx',
      ...(process.env.BENCH_CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_CPU_PROF] : []),
    ],
    env: { ...process.env, BENCH_SERVER_CONFIG: JSON.stringify(config) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) =>
      reject(new Error(`${config.spec.name} server exited with code ${code} before listening`)),
    );
    child.on('message', (m: { type: string; port?: number }) => {
      if (m.type === 'ready' && m.port) resolve(m.port);
    });
  });
  child.removeAllListeners('exit');
  return {
    name: config.spec.name,
    url: `http://127.0.0.1:${port}`,
    child,
    counters: () =>
      new Promise((resolve) => {
        const onMessage = (m: { type: string } & ServerCounters) => {
          if (m.type !== 'counters') return;
          child.off('message', onMessage);
          resolve({ queries: m.queries, statements: m.statements, redis: m.redis, cpuMicros: m.cpuMicros });
        };
        child.on('message', onMessage);
        child.send({ type: 'counters' });
      }),
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        child.once('exit', () => {
          clearTimeout(timer);
          resolve();
        });
        child.send({ type: 'stop' });
      }),
  };
}

import type { DialectRemote } from '../scenarios/dialects.ts';

/** Which idempotency implementation a bench server runs in front of the same handlers. */
export type ContenderKind =
  | 'plain'
  | 'ours'
  | 'classic'
  | 'classic-kysely'
  | 'powertools'
  | 'node-idempotency'
  | 'replay-floor';

/** Everything a child server needs to build its router; sent to it as JSON. */
export interface ContenderSpec {
  /** Label printed in the tables, e.g. `ours-tx+pool`. */
  name: string;
  kind: ContenderKind;
  /** Ours only: `'transaction'` or `'lease'`. */
  mode?: 'transaction' | 'lease';
  /** Ours only: pass the raw `pg` pool for the fast path. */
  pool?: boolean;
  /** Ours only: the idempotency table (the scaling and purge scenarios use their own). */
  table?: string;
  /** Ours only: `false` turns its in-process replay cache off, so replays read the table. */
  cache?: boolean;
  /** Benched in the replay and round-trip scenarios only (a variant that changes nothing on first executions). */
  replayOnly?: boolean;
}

export interface ServerConfig {
  spec: ContenderSpec;
  /** Serve the dialects scenario's handlers on this MariaDB / SQLite / libSQL database instead of Postgres. */
  dialect?: DialectRemote;
  databaseUrl: string;
  redisUrl: string;
  /** Size of the child's `pg` pool (the same for every contender). */
  poolMax: number;
  /** Ports to listen on (inclusive); unset lets the OS pick (BENCH_PORT_BASE keeps a run inside a range). */
  portRange?: [number, number];
}

/** Marks every key a run sends, so runs never collide with rows of an earlier run. */
export const runTag = `${Date.now().toString(36)}`;

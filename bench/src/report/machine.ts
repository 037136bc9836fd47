import { execFileSync } from 'node:child_process';
import { cpus, loadavg, totalmem } from 'node:os';
import type { Kysely } from 'kysely';
import { sql } from 'kysely';

export interface MachineFacts {
  date: string;
  cpu: string;
  cores: number;
  memoryGiB: number;
  node: string;
  postgres: string;
  redis: string;
  /** 1-minute load average when the run started and ended: above the core count, other work shared the CPU. */
  loadStart: number;
  loadEnd?: number;
  /** 1-minute load average as each scenario started. */
  loadSamples?: { scenario: string; load: number; startedSecond?: number }[];
}

export async function machineFacts(db: Kysely<any>, redisUrl: string): Promise<MachineFacts> {
  const { rows } = await sql<{ v: string }>`SELECT current_setting('server_version') AS v`.execute(db);
  let redis = 'unknown';
  try {
    const info = execFileSync('redis-cli', ['-u', redisUrl, 'INFO', 'server'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    redis = /redis_version:(\S+)/.exec(info)?.[1] ?? redis;
  } catch {
    // redis-cli is optional: the version is a fact for the report, not needed to run.
  }
  return {
    date: new Date().toISOString(),
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    postgres: rows[0]?.v ?? 'unknown',
    redis,
    loadStart: loadavg()[0] ?? 0,
  };
}

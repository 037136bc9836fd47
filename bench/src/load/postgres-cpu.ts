import { readdirSync, readFileSync } from 'node:fs';

const TICK_MICROS = 10_000; // USER_HZ is 100 on Linux

/**
 * CPU time used by the local Postgres so far (all backends, plus what exited backends left in the postmaster's
 * children totals), in µs, read from /proc. Undefined when Postgres is not a local process (container, remote).
 */
export function postgresCpuMicros(): number | undefined {
  let total = 0;
  let found = false;
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return undefined;
  }
  for (const pid of pids) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue;
    }
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    if (comm !== 'postgres') continue;
    found = true;
    // Fields after "(comm)": state ppid … utime(14) stime(15) cutime(16) cstime(17), 1-based over the whole line.
    const fields = stat.slice(close + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    const cutime = Number(fields[13]);
    const cstime = Number(fields[14]);
    total += utime + stime + cutime + cstime;
  }
  return found ? total * TICK_MICROS : undefined;
}

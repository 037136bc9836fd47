import { type Kysely, sql } from 'kysely';
import type { ServerEvent, ServerProcess } from './server-process.ts';

/** What the ledger holds: a duplicate payment shows as a ref with more than one row. */
export async function ledgerSummary(db: Kysely<any>, refPrefix = '') {
  const like = `${refPrefix}%`;
  const { rows } = await sql<{ rows: number; distinct_refs: number; duplicated_refs: number }>`
    select count(*)::int as rows,
           count(distinct ref)::int as distinct_refs,
           (select count(*)::int from (
              select ref from ledger where ref like ${like} group by ref having count(*) > 1) d) as duplicated_refs
    from ledger where ref like ${like}`.execute(db);
  const row = rows[0];
  return { rows: row?.rows ?? 0, distinctRefs: row?.distinct_refs ?? 0, duplicatedRefs: row?.duplicated_refs ?? 0 };
}

/** Counts what the server processes reported: handler entries and middleware events by type. */
export function countEvents(...servers: ServerProcess[]) {
  const counts = new Map<string, number>();
  const bump = (name: string) => counts.set(name, (counts.get(name) ?? 0) + 1);
  const listener = (e: ServerEvent) => {
    if (e.ev === 'enter') bump(e.takeover ? 'handler runs (takeover)' : 'handler runs');
    else if (e.ev === 'idem') bump(eventType(e.event));
  };
  for (const s of servers) s.on('event', listener);
  return {
    counts,
    stop: () => {
      for (const s of servers) s.off('event', listener);
    },
  };
}

function eventType(event: unknown): string {
  if (event && typeof event === 'object') {
    const e = event as Record<string, unknown>;
    const name = e.type ?? e.kind ?? e.outcome ?? e.event;
    if (typeof name === 'string') return name;
  }
  return 'event';
}

export function formatCounts(counts: Map<string, number>): string {
  return [...counts].map(([k, v]) => `${v} ${k}`).join(', ') || 'nothing reported';
}

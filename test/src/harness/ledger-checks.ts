import type { Kysely } from 'kysely';
import type { ServerEvent, ServerProcess } from './server-process.ts';

/** What the ledger holds: a duplicate payment shows as a ref with more than one row. Plain Kysely: any dialect. */
export async function ledgerSummary(db: Kysely<any>, refPrefix = '') {
  const rows = await db.selectFrom('ledger').select('ref').where('ref', 'like', `${refPrefix}%`).execute();
  const perRef = new Map<string, number>();
  for (const { ref } of rows) perRef.set(String(ref), (perRef.get(String(ref)) ?? 0) + 1);
  const duplicatedRefs = [...perRef.values()].filter((n) => n > 1).length;
  return { rows: rows.length, distinctRefs: perRef.size, duplicatedRefs };
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

/**
 * Statements prepared once per connection on node-postgres (the fast path, and the general path through Kysely's
 * PostgresDialect): transaction mode's claim, with SQL-level `PREPARE`, sent as `EXECUTE name(literals)` inside the
 * same one-text round trip. Postgres then plans it once per connection instead of on every call (bench/sql, runs S7
 * and S9: +16–18% Postgres throughput on the light transaction, +10–22% on the payment one).
 *
 * Only statements sent before the handler runs are prepared: a connection that lost them fails there, before
 * anything ran, and the claim is retried with plain text. The completion stays plain text, so nothing after the
 * handler depends on what a connection still holds (preparing it too measured level once a probe for it was added).
 *
 * A statement's name is a hash of its text, so two instances (or two copies of this package) sharing a pool agree on
 * what a name means.
 */
export class PreparedStatements {
  /**
   * False once a connection had lost a statement prepared on it (`DISCARD ALL`, `DEALLOCATE`, a pooler handing out
   * another backend per transaction), or had one we did not know of (see PgSession): the instance sends plain texts
   * from then on.
   */
  enabled = true;
  /** `PREPARE` text by statement name. */
  readonly definitions = new Map<string, string>();

  /** Registers `body` (using `$1`…`$n` of `types`) and returns its name. */
  define(label: string, types: readonly string[], body: string): string {
    const name = `trpc_idempotency_${label}_${hash64(`${types.join(',')}\n${body}`)}`;
    this.definitions.set(name, `PREPARE ${name} (${types.join(', ')}) AS ${body}`);
    return name;
  }
}

/** SQLSTATE 26000 (invalid_sql_statement_name): an `EXECUTE` of a statement this connection does not have. */
export function lostPreparedStatement(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '26000';
}

/** SQLSTATE 42P05 (duplicate_prepared_statement): the connection has that name already. */
export function alreadyPrepared(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '42P05';
}

/** 64 bits of FNV-1a over UTF-16 code units (two 32-bit lanes), as 16 hex digits: names, not security. */
function hash64(text: string): string {
  let a = 0x811c9dc5;
  let b = 0x050c5d1f;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x01000193) ^ (a >>> 15);
  }
  return (a >>> 0).toString(16).padStart(8, '0') + (b >>> 0).toString(16).padStart(8, '0');
}

/** An `EXECUTE` of one of ours (see Statements): its connection must have the statement prepared. */
export function isExecute(statement: string): boolean {
  return statement.startsWith('EXECUTE trpc_idempotency_');
}

/**
 * The names each connection has prepared, keyed by the object that stands for the connection (a `pg` client, a
 * Kysely DatabaseConnection: both one object per connection). Shared by every instance of this module.
 */
const preparedOn = new WeakMap<object, Set<string>>();

/**
 * Prepares what `connection` lacks of `prepared`'s statements: a round trip of its own, once per connection, outside
 * any transaction. A name the connection has already is the same statement (names hash their text).
 */
export async function prepareOn(
  connection: object,
  query: (text: string) => Promise<unknown>,
  prepared: PreparedStatements,
): Promise<void> {
  const known = preparedOn.get(connection);
  const missing: string[] = [];
  for (const name of prepared.definitions.keys()) if (!known?.has(name)) missing.push(name);
  if (missing.length === 0) return;
  const texts = missing.map((name) => prepared.definitions.get(name) ?? '');
  try {
    await query(texts.join(';\n'));
  } catch (error) {
    if (!alreadyPrepared(error)) throw error;
    // The connection has one already, and we did not know it: another copy of this package prepared it, or the
    // pool hands out a new object per checkout, or a pooler put another client's backend behind this one. Whatever
    // holds the name is replaced with ours (a statement squatting it must never run as our claim). The next calls
    // send plain texts rather than risk a failed PREPARE each.
    prepared.enabled = false;
    for (let i = 0; i < missing.length; i++) {
      const text = texts[i] ?? '';
      await query(text).catch(async (e: unknown) => {
        if (!alreadyPrepared(e)) throw e;
        await query(`DEALLOCATE ${missing[i]}`);
        await query(text);
      });
    }
  }
  const names = known ?? new Set<string>();
  for (const name of missing) names.add(name);
  preparedOn.set(connection, names);
}

/** After `error` on `connection`: if it had lost our statements, the instance sends plain texts from now on. */
export function noticeLostStatements(
  connection: object,
  prepared: PreparedStatements | undefined,
  error: unknown,
): void {
  if (!prepared || !lostPreparedStatement(error)) return;
  prepared.enabled = false;
  preparedOn.delete(connection);
}

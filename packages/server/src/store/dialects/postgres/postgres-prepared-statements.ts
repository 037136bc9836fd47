/**
 * Statements prepared once per connection on node-postgres (the fast path, and the general path through Kysely's
 * PostgresDialect): transaction mode's claim and completion, with SQL-level `PREPARE`, sent as `EXECUTE
 * name(literals)` inside the same one-text round trips. Postgres then plans them once per connection instead of on
 * every call (bench/sql, runs S7, S9 and S12: +16–18% Postgres throughput on the light transaction for the claim
 * alone, and the completion's check free once it is not planned per call).
 *
 * A connection that lost the claim, or holds its name already (a transaction pooler runs each transaction on any
 * server connection), fails at it, before anything ran, and the claim is retried with plain text. The completion
 * runs after the handler, so it is sent prepared only in a transaction whose claim ran prepared: each statement's
 * name hashes its text and the texts defined before it, which one `PREPARE` text creates ahead of it, so a
 * connection that has the claim has the completion too. Only a `DEALLOCATE` inside the handler's transaction can
 * take it away then: the completion fails and nothing commits.
 *
 * Names hash texts, so two instances (or two copies of this package) sharing a pool agree on what a name means.
 */
export class PreparedStatements {
  /**
   * False once a connection had lost a statement prepared on it (`DISCARD ALL`, `DEALLOCATE`, a pooler handing out
   * another backend per transaction), or had one we did not know of (see PoolSession): the instance sends plain texts
   * from then on.
   */
  enabled = true;
  /** `PREPARE` text by statement name. */
  readonly definitions = new Map<string, string>();

  /**
   * Registers `body` (using `$1`…`$n` of `types`) and returns its name, which hashes its text and every text
   * registered before it: those are prepared ahead of it, in the same text (see `prepareOn`).
   */
  define(label: string, types: readonly string[], body: string): string {
    const before = [...this.definitions.values()].join('\n');
    const name = `trpc_idempotency_${label}_${hash64(`${before}\n${types.join(',')}\n${body}`)}`;
    this.definitions.set(name, `PREPARE ${name} (${types.join(', ')}) AS ${body}`);
    return name;
  }
}

/**
 * The claim failed, before anything ran, because the connection's prepared statements are not what this instance
 * believed: it lacks one (26000, invalid_sql_statement_name: `DISCARD ALL`, `DEALLOCATE`, a transaction pooler
 * running the `EXECUTE` on another backend) or has one already (42P05, duplicate_prepared_statement: see
 * `prepareOn`). The instance sends plain texts from then on, so the claim is retried.
 */
export function preparedStatementMismatch(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '26000' || code === '42P05';
}

/** SQLSTATE 26000: an `EXECUTE` of a statement this connection does not have. */
export function lostPreparedStatement(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '26000';
}

/** SQLSTATE 42P05: the connection has that name already. */
function alreadyPrepared(error: unknown): boolean {
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
 * Prepares what `connection` lacks of `prepared`'s statements, in the order they were defined: one text, a round trip
 * of its own once per connection, outside any transaction. Postgres runs its statements in order and stops at the
 * first error, and a `PREPARE` is not undone by a later one's failure, so a statement is never created without those
 * defined before it. A name the connection has already (42P05) means it is not the connection we think: a transaction
 * pooler put another client's backend behind it, another copy of this package prepared there, or the pool hands out
 * a new object per checkout. The instance then sends plain texts, and the error goes to the claim, which is retried
 * before anything ran: whatever holds the name is never executed as our claim, and nothing is replaced, since behind
 * a pooler the next statement may reach yet another backend.
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
  try {
    await query(missing.map((name) => prepared.definitions.get(name) ?? '').join(';\n'));
  } catch (error) {
    if (alreadyPrepared(error)) prepared.enabled = false;
    throw error;
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

/** A table name split and quoted once, so every statement can embed it safely. */
export interface TableName {
  /** The quoted, possibly schema-qualified name: `"app"."idempotency_keys"`. */
  readonly qualified: string;
  /** The quoted name of the expiry index, in the table's schema. */
  readonly expiryIndex: string;
  /** The unquoted name of the expiry index (for `CREATE INDEX`, which takes no schema). */
  readonly expiryIndexBare: string;
  /** The quoted schema, when one was given. */
  readonly schema: string | undefined;
  /** The parts as given, unquoted (plain identifiers): for dialects that quote differently. */
  readonly parts: { readonly schema: string | undefined; readonly name: string; readonly index: string };
}

const PART = /^[A-Za-z_][A-Za-z0-9_$]{0,62}$/;

/**
 * Parses `table` (`name` or `schema.name`). Parts are plain identifiers, quoted so their case is kept;
 * anything else is refused early instead of risking malformed SQL.
 */
export function parseTableName(table: string): TableName {
  const parts = typeof table === 'string' ? table.split('.') : [];
  if (parts.length < 1 || parts.length > 2 || !parts.every((p) => PART.test(p))) {
    throw new TypeError(
      'createIdempotency: `table` must be `name` or `schema.name`, each part 1–63 letters, digits, _ or $, ' +
        `not starting with a digit or $ (got ${JSON.stringify(table)})`,
    );
  }
  const name = parts[parts.length - 1]!;
  const schema = parts.length === 2 ? quoteIdent(parts[0]!) : undefined;
  const indexBare = `${name.slice(0, 50)}_expires_idx`;
  return {
    qualified: schema ? `${schema}.${quoteIdent(name)}` : quoteIdent(name),
    expiryIndex: schema ? `${schema}.${quoteIdent(indexBare)}` : quoteIdent(indexBare),
    expiryIndexBare: quoteIdent(indexBare),
    schema,
    parts: { schema: parts.length === 2 ? parts[0] : undefined, name, index: indexBare },
  };
}

function quoteIdent(part: string): string {
  return `"${part.replaceAll('"', '""')}"`;
}

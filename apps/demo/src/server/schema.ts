import type { ColumnType, Generated, Kysely } from 'kysely';
import { sql } from 'kysely';

/** One charged payment. `idempotency_key` is recorded but deliberately NOT unique: a duplicate charge must show up. */
export interface PaymentsTable {
  id: Generated<number>;
  user_id: string;
  amount_cents: number;
  description: string;
  idempotency_key: string;
  created_at: ColumnType<Date, never, never>;
}

export interface DemoDatabase {
  payments: PaymentsTable;
}

/** The app's own table. `IF NOT EXISTS` keeps it safe to run on every start and from several processes. */
export async function migratePayments(db: Kysely<DemoDatabase>): Promise<void> {
  await db.schema
    .createTable('payments')
    .ifNotExists()
    .addColumn('id', 'serial', (col) => col.primaryKey())
    .addColumn('user_id', 'text', (col) => col.notNull())
    .addColumn('amount_cents', 'integer', (col) => col.notNull())
    .addColumn('description', 'text', (col) => col.notNull())
    .addColumn('idempotency_key', 'text', (col) => col.notNull())
    .addColumn('created_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('payments_user_id_idx').ifNotExists().on('payments').column('user_id').execute();
}

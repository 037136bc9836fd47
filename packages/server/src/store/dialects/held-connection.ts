import { CompiledQuery, type DatabaseConnection, type Kysely, type QueryResult } from 'kysely';
import type { Row } from '../session.js';
import type { StepConnection } from './step.js';

/** A Kysely connection checked out until `release()`, and our statements on it (without the app's plugins). */
export interface HeldConnection extends StepConnection {
  readonly connection: DatabaseConnection;
  release(): void;
}

/**
 * Checks a connection out of the Kysely instance's driver and keeps it until `release()`. Kysely only lends a
 * connection for the length of a callback; the callback here waits for the release.
 */
export function holdConnection(db: Kysely<any>, mapRow: (row: Row) => Row): Promise<HeldConnection> {
  return new Promise((resolve, reject) => {
    let held = false;
    db.getExecutor()
      .provideConnection(async (connection) => {
        let release!: () => void;
        const released = new Promise<void>((r) => {
          release = r;
        });
        held = true;
        resolve({
          connection,
          release,
          query: async (sql, parameters = []) => {
            const result: QueryResult<Row> = await connection.executeQuery(CompiledQuery.raw(sql, [...parameters]));
            return { ...result, rows: result.rows.map(mapRow) };
          },
        });
        await released;
      })
      .catch((error) => {
        if (!held) reject(error);
      });
  });
}

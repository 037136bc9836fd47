import { CompiledQuery, type DatabaseConnection, type Kysely, type QueryResult } from 'kysely';
import type { Row, Step, StepConnection } from '../dialects/dialect.js';

/** A Kysely connection checked out until `release()`, and our statements on it (without the app's plugins). */
export interface HeldConnection extends StepConnection {
  readonly connection: DatabaseConnection;
  /**
   * Runs the steps registered with `onRelease` (in order, each once; one that fails does not stop the others), then
   * gives the connection back. The connection goes back only after them, so awaiting is only for ordering.
   */
  release(): Promise<void>;
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
        let giveBack!: () => void;
        const released = new Promise<void>((r) => {
          giveBack = r;
        });
        held = true;
        const onRelease: Step[] = [];
        const self: HeldConnection = {
          connection,
          onRelease: (step) => {
            onRelease.push(step);
          },
          release: async () => {
            // A failure here means the connection failed (these are single reads of session state): the server
            // ended its session, and with it whatever the step was to undo; mysql2's pool drops such a connection.
            for (const step of onRelease.splice(0)) await step(self).catch(() => {});
            giveBack();
          },
          query: async (sql, parameters = []) => {
            const result: QueryResult<Row> = await connection.executeQuery(CompiledQuery.raw(sql, [...parameters]));
            return { ...result, rows: result.rows.map(mapRow) };
          },
        };
        resolve(self);
        await released;
      })
      .catch((error) => {
        if (!held) reject(error);
      });
  });
}

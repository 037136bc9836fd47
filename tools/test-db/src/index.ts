import './provided-context.js';

export { createMariaDbDatabase, type MariaDbDatabase, MYSQL_URL } from './mariadb-database.js';
export { findPgBouncer, PGBOUNCER_MISSING, type PgBouncer, startPgBouncer } from './pgbouncer.js';
export { type EmbeddedPostgres, resolveTestServer, startEmbeddedPostgres, type TestServer } from './resolve-server.js';
export { createSqliteFile, type SqliteFile } from './sqlite-database.js';
export { createTestDatabase, type TestDatabase } from './test-database.js';

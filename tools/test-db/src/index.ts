export { type EmbeddedPostgres, resolveTestServer, startEmbeddedPostgres, type TestServer } from './resolve-server.ts';
export { createTestDatabase, type TestDatabase } from './test-database.ts';

import './provided-context.js';

export { type EmbeddedPostgres, resolveTestServer, startEmbeddedPostgres, type TestServer } from './resolve-server.js';
export { createTestDatabase, type TestDatabase } from './test-database.js';

import type { TestProject } from 'vitest/node';
import './provided-context.js';
import { resolveTestServer } from './resolve-server.js';

/** Vitest global setup: resolves one Postgres server per run and hands its URL to every test file. */
export default async function setup(project: TestProject) {
  const server = await resolveTestServer();
  if (!process.env.CI || server.source !== 'DATABASE_URL') {
    console.log(`[test-db] Postgres from ${server.source}`);
  }
  project.provide('pgAdminUrl', server.adminUrl);
  return () => server.stop();
}

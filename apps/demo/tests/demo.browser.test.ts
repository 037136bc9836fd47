import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, chromium, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const demoDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const repoRoot = path.resolve(demoDir, '../..');
const artifactsDir = path.join(repoRoot, 'test', 'artifacts');
const nextBin = createRequire(import.meta.url).resolve('next/dist/bin/next');
const inCI = process.env.CI === 'true' || process.env.CI === '1';

function findChromium(): string | undefined {
  const candidates = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'];
  return candidates.find((candidate): candidate is string => !!candidate && existsSync(candidate));
}

const chromiumPath = findChromium();
if (!chromiumPath && inCI) {
  throw new Error('CI is set but no Chromium was found: install Debian `chromium` or point CHROMIUM_PATH at one.');
}
if (!chromiumPath) {
  console.warn('[demo browser test] skipped: no Chromium (set CHROMIUM_PATH or `apt-get install chromium`).');
}

function newestMtime(target: string): number {
  if (!existsSync(target)) return 0;
  const stat = statSync(target);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(stat.mtimeMs, ...readdirSync(target).map((entry) => newestMtime(path.join(target, entry))));
}

/** Builds the app unless `.next` is newer than its sources and the two packages it uses (Turborepo usually built it). */
function ensureBuilt(): void {
  // Set when iterating on the test itself while the packages keep being rebuilt.
  if (process.env.TEST_DEMO_REUSE_BUILD === '1' && existsSync(path.join(demoDir, '.next', 'BUILD_ID'))) return;
  const buildId = path.join(demoDir, '.next', 'BUILD_ID');
  const sources = ['app', 'src', 'next.config.ts', 'package.json'].map((entry) => path.join(demoDir, entry));
  sources.push(path.join(repoRoot, 'packages/server/dist'), path.join(repoRoot, 'packages/client/dist'));
  if (existsSync(buildId) && statSync(buildId).mtimeMs > Math.max(...sources.map(newestMtime))) return;
  const build = spawnSync(process.execPath, [nextBin, 'build'], { cwd: demoDir, encoding: 'utf8' });
  if (build.status !== 0) throw new Error(`next build failed:\n${build.stdout}\n${build.stderr}`);
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

async function waitUntilServing(url: string, app: ChildProcess, output: () => string, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (app.exitCode !== null) throw new Error(`next start exited with ${app.exitCode}:\n${output()}`);
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`the demo did not answer at ${url} within ${timeoutMs / 1000} s:\n${output()}`);
}

describe.skipIf(!chromiumPath)('the demo in Chromium', () => {
  let app: ChildProcess;
  let browser: Browser;
  let page: Page;
  let dataDir: string;
  let log = '';

  beforeAll(async () => {
    ensureBuilt();
    const port = await freePort();
    dataDir = mkdtempSync(path.join(tmpdir(), 'demo-pglite-'));
    // Vitest sets NODE_ENV=test; a production build served under it renders the wrong React build.
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      NODE_ENV: 'production',
      DEMO_DATA_DIR: dataDir,
      NEXT_TELEMETRY_DISABLED: '1',
    };
    // The embedded PGlite in a fresh folder: an empty ledger, whatever DATABASE_URL the test run has.
    delete env.DATABASE_URL;
    app = spawn(process.execPath, [nextBin, 'start', '-p', String(port), '-H', '127.0.0.1'], {
      cwd: demoDir,
      env,
      detached: true, // its own process group, so afterAll stops next and its workers together
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    app.stdout?.on('data', (chunk) => (log += chunk));
    app.stderr?.on('data', (chunk) => (log += chunk));
    const baseUrl = `http://127.0.0.1:${port}`;
    await waitUntilServing(baseUrl, app, () => log, 60_000);
    // PGlite initialises its fresh data folder on start: seconds, or much longer on a busy machine.
    const ledgerUrl = `${baseUrl}/api/trpc/payments.ledger?input=${encodeURIComponent('{"json":{"limit":1}}')}`;
    await waitUntilServing(ledgerUrl, app, () => log, 180_000);

    browser = await chromium.launch({
      executablePath: chromiumPath,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-quic',
        '--no-first-run',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.on('pageerror', (error) => (log += `[browser] ${error.message}\n`));
    page.on('console', (message) => (log += `[console.${message.type()}] ${message.text()}\n`));
    page.on('response', (response) => (log += `[http] ${response.status()} ${response.url()}\n`));
    page.on('requestfailed', (request) => (log += `[http] failed ${request.url()} ${request.failure()?.errorText}\n`));
    await page.goto(baseUrl);
    // A fresh data folder: the page loaded once the (empty) ledger arrived.
    await page
      .getByTestId('ledger-rows')
      .filter({ hasText: /^0$/ })
      .waitFor({ timeout: 30_000 })
      .catch((error: Error) => {
        throw new Error(`the page never showed its empty ledger: ${error.message}\n${log}`);
      });
  });

  afterAll(async () => {
    await browser?.close();
    if (app?.pid && app.exitCode === null) process.kill(-app.pid, 'SIGTERM');
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  /** The newest submission row, once it has settled. */
  async function settledSubmission(): Promise<Locator> {
    const row = page.getByTestId('submission').first();
    await expect.poll(() => row.getAttribute('data-outcome'), { timeout: 30_000 }).not.toBe('pending');
    return row;
  }

  async function pay(mode: string, amount: string, description: string): Promise<Locator> {
    await page.getByTestId(`fault-${mode}`).check();
    await page.getByTestId('amount').fill(amount);
    await page.getByTestId('description').fill(description);
    await page.getByTestId('pay').click();
    return settledSubmission();
  }

  async function ledgerRows(): Promise<string | null> {
    return page.getByTestId('ledger-rows').textContent();
  }

  it('charges once when the response to the first attempt is lost, and shows the retry as replayed', async () => {
    const row = await pay('lose-response', '42.00', 'Lost-answer coffee');
    expect(await row.getAttribute('data-outcome'), (await row.textContent()) ?? '').toBe('charged');
    expect(Number(await row.getAttribute('data-attempts'))).toBeGreaterThanOrEqual(2);
    expect(await row.getAttribute('data-replayed')).toBe('true');
    await expect.poll(ledgerRows).toBe('1');
    expect(await page.getByTestId('ledger-body').locator('tr').count()).toBe(1);
    expect(await page.getByTestId('ledger-duplicates').textContent()).toBe('0');
    mkdirSync(artifactsDir, { recursive: true });
    await page.screenshot({ path: path.join(artifactsDir, 'demo-lost-response.png'), fullPage: true });
  });

  it('retries an attempt whose answer is slower than the attempt timeout, with the same key: one payment', async () => {
    const row = await pay('slow-response', '3.10', 'Slow answer');
    expect(await row.getAttribute('data-outcome'), (await row.textContent()) ?? '').toBe('charged');
    expect(Number(await row.getAttribute('data-attempts'))).toBeGreaterThanOrEqual(2);
    await expect(row.textContent()).resolves.toContain('timed out');
    expect(await row.getAttribute('data-replayed')).toBe('true');
    await expect.poll(ledgerRows).toBe('2');
  });

  it('rides out a real 503 with Retry-After and charges once', async () => {
    const row = await pay('unavailable', '7.25', 'Gateway busy');
    expect(await row.getAttribute('data-outcome'), (await row.textContent()) ?? '').toBe('charged');
    expect(Number(await row.getAttribute('data-attempts'))).toBeGreaterThanOrEqual(2);
    await expect(row.textContent()).resolves.toContain('503');
    await expect.poll(ledgerRows).toBe('3');
  });

  it('gets a real 409 while an earlier copy is in flight, then replays it: one payment', async () => {
    const row = await pay('in-flight-duplicate', '19.99', 'Slow link');
    expect(await row.getAttribute('data-outcome'), (await row.textContent()) ?? '').toBe('charged');
    await expect(row.textContent()).resolves.toContain('409');
    expect(await row.getAttribute('data-replayed')).toBe('true');
    await expect.poll(ledgerRows).toBe('4');
  });

  it('ends a double-clicked submission (the same key sent twice at once) as one payment', async () => {
    await page.getByTestId('fault-off').check();
    const key = await page.getByTestId('form-key').textContent();
    await page.getByTestId('amount').fill('99.00');
    await page.getByTestId('description').fill('Double click');
    await page.getByTestId('pay-twice').click();
    const rows = page.locator(`[data-testid="submission"][data-key="${key}"]`);
    await expect.poll(() => rows.count()).toBe(2);
    for (const index of [0, 1]) {
      await expect.poll(() => rows.nth(index).getAttribute('data-outcome'), { timeout: 30_000 }).toBe('charged');
    }
    const outcomes = await rows.locator('td.outcome').allTextContents();
    expect(outcomes[0]).toBe(outcomes[1]); // the same payment id
    await expect.poll(ledgerRows).toBe('5');
    expect(await page.getByTestId('ledger-duplicates').textContent()).toBe('0');
    expect(await rows.locator('td .tag.replay').count()).toBe(1); // one copy ran, the other was replayed
    // The form's key is spent once the server answered.
    await expect.poll(() => page.getByTestId('form-key').textContent()).not.toBe(key);

    await page.screenshot({ path: path.join(artifactsDir, 'demo.png'), fullPage: true });
    if (process.env.UPDATE_SCREENSHOT === '1') {
      await page.screenshot({ path: path.join(repoRoot, 'docs', 'demo.png'), fullPage: true });
    }
  });
});

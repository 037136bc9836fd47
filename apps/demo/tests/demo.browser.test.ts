import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Browser, chromium, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningDemo, repoRoot, runStorm, startDemo } from './support/demoServer';

const artifactsDir = path.join(repoRoot, 'test', 'artifacts');
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
  console.warn(
    '[demo browser test] Chromium tests skipped: no Chromium (set CHROMIUM_PATH or `apt-get install chromium`).',
  );
}

describe('the demo on embedded PGlite', () => {
  let demo: RunningDemo;
  let dataDir: string;

  beforeAll(async () => {
    // A fresh data folder: an empty ledger, whatever DATABASE_URL the test run has.
    dataDir = mkdtempSync(path.join(tmpdir(), 'demo-pglite-'));
    demo = await startDemo({ dataDir });
  });

  afterAll(() => {
    demo?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  describe.skipIf(!chromiumPath)('in Chromium', () => {
    let browser: Browser;
    let page: Page;

    beforeAll(async () => {
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
      // A fresh context: its own profile, no storage from anything before.
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      page = await context.newPage();
      const log = demo.log;
      page.on('pageerror', (error) => (log.text += `[browser] ${error.message}\n`));
      page.on('console', (message) => (log.text += `[console.${message.type()}] ${message.text()}\n`));
      page.on(
        'requestfailed',
        (request) => (log.text += `[http] failed ${request.url()} ${request.failure()?.errorText}\n`),
      );
      await page.goto(demo.baseUrl);
      await page
        .getByTestId('ledger-rows')
        .filter({ hasText: /^0$/ })
        .waitFor({ timeout: 30_000 })
        .catch((error: Error) => {
          throw new Error(`the page never showed its empty ledger: ${error.message}\n${log.text}`);
        });
    });

    afterAll(async () => {
      await browser?.close();
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

    /** The demo user's ledger as the server has it now: never a page's last poll, which may lag behind. */
    async function serverLedger(): Promise<{ rows: number; duplicates: number }> {
      const input = encodeURIComponent(JSON.stringify({ json: { limit: 1 } }));
      const response = await fetch(`${demo.baseUrl}/api/trpc/payments.ledger?input=${input}`, {
        headers: { 'x-demo-user': 'demo' },
      });
      const body = (await response.json()) as { result: { data: { json: { rows: number; duplicates: number } } } };
      const { rows, duplicates } = body.result.data.json;
      return { rows, duplicates };
    }

    async function ledgerCount(): Promise<number> {
      return (await serverLedger()).rows;
    }

    /** The server's ledger has `rows` rows and no key twice, and the page `on` shows as much. */
    async function expectLedger(rows: number, on: Page = page): Promise<void> {
      await expect.poll(() => serverLedger(), { timeout: 30_000 }).toEqual({ rows, duplicates: 0 });
      await expect.poll(() => on.getByTestId('ledger-rows').textContent(), { timeout: 30_000 }).toBe(String(rows));
      expect(await on.getByTestId('ledger-duplicates').textContent()).toBe('0');
    }

    /** Pays with every answer lost: the link gives up, the outcome is unknown, the key is kept. */
    async function payWithEveryAnswerLost(amount: string, description: string): Promise<string> {
      await page.getByTestId('fault-lose-every-response').check();
      await page.getByTestId('amount').fill(amount);
      await page.getByTestId('description').fill(description);
      await page.getByTestId('pay').click();
      const status = page.getByTestId('pay-status');
      await expect.poll(() => status.getAttribute('data-outcome'), { timeout: 60_000 }).toBe('unknown');
      const key = (await status.getAttribute('data-key')) ?? '';
      expect(key).toMatch(/^[0-9a-f-]{36}$/);
      expect(await page.getByTestId('form-key').textContent()).toBe(key); // kept for "try again"
      return key;
    }

    async function screenshot(name: string, on: Page = page): Promise<void> {
      mkdirSync(artifactsDir, { recursive: true });
      await on.screenshot({ path: path.join(artifactsDir, name), fullPage: true });
      if (process.env.UPDATE_SCREENSHOT === '1') {
        await on.screenshot({ path: path.join(repoRoot, 'docs', name), fullPage: true });
      }
    }

    it('(a) ends a double-clicked Pay as one payment: both clicks carry one key', async () => {
      const before = await ledgerCount();
      await page.getByTestId('fault-off').check();
      await page.getByTestId('amount').fill('99.00');
      await page.getByTestId('description').fill('Double click');
      await page.getByTestId('pay').dblclick();
      const status = page.getByTestId('pay-status');
      await expect.poll(() => status.getAttribute('data-outcome'), { timeout: 30_000 }).toBe('charged');
      const key = await status.getAttribute('data-key');
      const rows = page.locator(`[data-testid="submission"][data-key="${key}"]`);
      await expect.poll(() => rows.count()).toBe(2);
      for (const index of [0, 1]) {
        await expect.poll(() => rows.nth(index).getAttribute('data-outcome'), { timeout: 30_000 }).toBe('charged');
      }
      const outcomes = await rows.locator('td.outcome').allTextContents();
      expect(outcomes[0]).toBe(outcomes[1]); // the same payment id
      await expectLedger(before + 1);
      // The key is spent once the server answered.
      await expect.poll(() => page.getByTestId('form-key').textContent()).not.toBe(key);
      await screenshot('demo.png');
    });

    it('(b) after every answer was lost, "Try again" sends the same key: one payment, and the page says it was charged once', async () => {
      const before = await ledgerCount();
      const key = await payWithEveryAnswerLost('31.00', 'Lost twice over');
      await page.getByTestId('fault-off').check();
      await page.getByTestId('try-again').click();
      const status = page.getByTestId('pay-status');
      await expect.poll(() => status.getAttribute('data-outcome'), { timeout: 30_000 }).toBe('charged');
      expect(await status.getAttribute('data-key')).toBe(key);
      expect(await status.textContent()).toMatch(/Charged \$31\.00 once/);
      const rows = page.locator(`[data-testid="submission"][data-key="${key}"]`);
      expect(await rows.count()).toBe(2);
      expect(await rows.first().getAttribute('data-replayed')).toBe('true');
      await expectLedger(before + 1);
    });

    it('(c) a payment whose answer is lost survives a reload: resumed with its key, one payment, and a banner says so', async () => {
      const before = await ledgerCount();
      await page.getByTestId('fault-off').check();
      await page.getByTestId('amount').fill('40.00');
      await page.getByTestId('description').fill('Train ticket');
      await page.getByTestId('reload-lost').click();
      await page.getByTestId('reloading').waitFor({ timeout: 30_000 });
      const key = (await page.getByTestId('pay-status').getAttribute('data-key')) ?? '';
      expect(key).toMatch(/^[0-9a-f-]{36}$/);
      await screenshot('react-resume-1-answer-lost.png');

      const banner = page.locator(`[data-testid="resume-banner"][data-key="${key}"]`);
      await banner.waitFor({ timeout: 60_000 }); // only after the reload
      await expect.poll(() => banner.getAttribute('data-status'), { timeout: 30_000 }).toBe('succeeded');
      expect(await banner.getAttribute('data-replayed')).toBe('true'); // the first attempt had charged
      expect(await banner.textContent()).toMatch(/Your payment of \$40\.00 \(Train ticket\) went through/);
      await expectLedger(before + 1);
      const kept = await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('trpc-idempotency')));
      expect(kept).toEqual([]);
      await screenshot('react-resume-2-resumed.png');
    });

    it('(c) with ?store=indexeddb: the pending payment is kept in IndexedDB, resumed after the reload, then forgotten', async () => {
      const tab = await page.context().newPage();
      await tab.goto(`${demo.baseUrl}/?store=indexeddb`);
      await tab.getByTestId('ledger-rows').waitFor({ timeout: 30_000 });
      const before = await ledgerCount();
      await tab.getByTestId('amount').fill('41.00');
      await tab.getByTestId('description').fill('Stored in IndexedDB');
      await tab.getByTestId('reload-lost').click();
      await tab.getByTestId('reloading').waitFor({ timeout: 30_000 });
      const key = (await tab.getByTestId('pay-status').getAttribute('data-key')) ?? '';
      const pendingRows = () =>
        tab.evaluate(
          () =>
            new Promise<number>((resolve, reject) => {
              const open = indexedDB.open('trpc-idempotency-demo');
              open.onerror = () => reject(open.error);
              open.onsuccess = () => {
                const count = open.result.transaction('pendingCalls', 'readonly').objectStore('pendingCalls').count();
                count.onsuccess = () => {
                  open.result.close();
                  resolve(count.result);
                };
                count.onerror = () => reject(count.error);
              };
            }),
        );
      // Before the reload (it comes 1.5 s after the lost answer): in IndexedDB, not in localStorage.
      expect(await pendingRows()).toBe(1);
      expect(
        await tab.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('trpc-idempotency'))),
      ).toEqual([]);

      const banner = tab.locator(`[data-testid="resume-banner"][data-key="${key}"]`);
      await banner.waitFor({ timeout: 60_000 });
      await expect.poll(() => banner.getAttribute('data-status'), { timeout: 30_000 }).toBe('succeeded');
      await expectLedger(before + 1, tab);
      expect(await pendingRows()).toBe(0);
      await tab.close();
    });

    it('(d) a changed input after an unknown outcome first settles the earlier payment and shows it; the new input is paid under a new key only when the user confirms', async () => {
      const before = await ledgerCount();
      const earlierKey = await payWithEveryAnswerLost('10.00', 'First try');
      await page.getByTestId('fault-off').check();
      await page.getByTestId('amount').fill('11.00');
      await page.getByTestId('pay').click();
      const banner = page.getByTestId('earlier-banner');
      await banner.waitFor({ timeout: 30_000 });
      expect(await banner.getAttribute('data-status')).toBe('succeeded');
      expect(await banner.getAttribute('data-key')).toBe(earlierKey);
      expect(await banner.textContent()).toMatch(/earlier payment of \$10\.00 \(First try\) went through/);
      await expect.poll(() => banner.textContent()).toMatch(/The changed one was not sent/);
      await expectLedger(before + 1);
      await page.getByTestId('pay-as-well').click();
      const status = page.getByTestId('pay-status');
      await expect.poll(() => status.getAttribute('data-outcome'), { timeout: 30_000 }).toBe('charged');
      expect(await status.getAttribute('data-key')).not.toBe(earlierKey);
      expect(await status.textContent()).toMatch(/Charged \$11\.00/);
      await expectLedger(before + 2);
    });

    it('(e) two tabs resuming the same pending payment end with one payment, and both learn it went through', async () => {
      const before = await ledgerCount();
      const key = await payWithEveryAnswerLost('7.00', 'Two tabs');
      // Two new tabs of the same browser (one storage), on a network whose first answer per key is slower than
      // the attempt timeout: each resume takes seconds, so both tabs find the payment pending and race for it.
      const tabs = await Promise.all([page.context().newPage(), page.context().newPage()]);
      await Promise.all(tabs.map((tab) => tab.goto(`${demo.baseUrl}/?network=slow-response`)));
      for (const tab of tabs) {
        const banner = tab.locator(`[data-testid="resume-banner"][data-key="${key}"]`);
        await expect.poll(() => banner.getAttribute('data-status'), { timeout: 60_000 }).toBe('succeeded');
      }
      // Both re-sent the key one after the other (Web Locks); the server charged once and replayed.
      await expectLedger(before + 1, tabs[0]);
      await Promise.all(tabs.map((tab) => tab.close()));
    });
  });

  it('passes the storm: concurrent flaky clients, one ledger row per logical payment, none charged twice', () => {
    const storm = runStorm(demo.baseUrl, ['--payments', '60', '--clients', '8']);
    expect(storm.exitCode, storm.output).toBe(0);
    expect(storm.table.get('ledger rows'), storm.output).toBe(60);
    expect(storm.table.get('duplicates (rows sharing a key)'), storm.output).toBe(0);
    expect(storm.table.get('faults injected'), storm.output).toBeGreaterThan(0);
  });
});

// The browser side of the browser tests: Debian's chromium driven by
// playwright-core (the version built for it, pinned in package-lock.json;
// Playwright's own browser download is not used). Every page opened through
// watch() records console errors, page errors and failed requests; a test
// ends with expectClean() so that any of them fails it.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { TLS, fail, log } from '../e2e/lib.mjs';

export const CHROMIUM = process.env.MB_CHROMIUM || '/usr/bin/chromium';

export async function launch() {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(`no chromium at ${CHROMIUM} (scripts/bootstrap.sh installs Debian's chromium)`);
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

// Where screenshots go: $MB_TEST_OUTPUT (scripts/test.sh: build/<preset>/test-output).
export function outputDir() {
  const dir = path.resolve(process.env.MB_TEST_OUTPUT || path.join(path.dirname(fileURLToPath(import.meta.url)), 'test-output'));
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

export async function screenshot(page, name) {
  const file = path.join(outputDir(), `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  log(`  screenshot ${file}`);
  return file;
}

// A new context and page whose console errors, page errors and failed
// requests are recorded in page.problems. allow(text): a problem the test
// causes on purpose (e.g. the 400 of an order the server refuses: the
// browser logs every 4xx answer as a console error).
export async function watch(browser, name, { colorScheme = 'light', allow = () => false } = {}) {
  // --tls: the server's certificate is the test CA's, which the browser's own
  // store does not hold; the page is still an https origin (WebCrypto, wss).
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, colorScheme, ignoreHTTPSErrors: TLS !== null });
  const page = await context.newPage();
  page.problems = [];
  page.allow = allow;
  const note = (text) => {
    if (!page.allow(text)) page.problems.push(`${name}: ${text}`);
  };
  page.on('console', (m) => {
    if (m.type() === 'error') note(`console error: ${m.text()} (${m.location()?.url ?? ''})`);
  });
  page.on('pageerror', (e) => note(`page error: ${e.message}`));
  page.on('requestfailed', (r) => {
    const why = r.failure()?.errorText ?? '';
    // A WebSocket or fetch the page closes itself while navigating away is not a failure.
    if (why.includes('ERR_ABORTED')) return;
    note(`request failed: ${r.method()} ${r.url()} ${why}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 500) note(`HTTP ${r.status()} ${r.request().method()} ${r.url()}`);
  });
  return { context, page };
}

export function expectClean(...pages) {
  const problems = pages.flatMap((p) => p.problems);
  if (problems.length) fail(`the pages reported ${problems.length} problem(s):\n    ${problems.join('\n    ')}`);
}

// The ladder as the page shows it: { bids: [[price, qty]], asks: [...] },
// best first, the texts of the cells.
export async function ladder(page) {
  return page.evaluate(() => {
    const side = (id) => [...document.querySelectorAll(`#${id} tr`)].map((tr) => [
      tr.querySelector('.price').textContent, tr.querySelector('.qty').textContent]);
    return { bids: side('bids'), asks: side('asks').reverse() };
  });
}

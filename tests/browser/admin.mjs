// The operator page in a real browser: served without a token, it asks for
// one; with it, an account is created, given an API key and a deposit, and
// that key signs in on the trading page; the operator halts the market and
// the trading page shows it halted and refuses orders; a market listed at run
// time joins both pages' lists; the server's own metrics are drawn. No console error or failed request.
//
// Usage: node admin.mjs <path to matchbook>

import {
  binaryFromArgs, check, eq, httpRequest, log, RestClient, runMain, step, units, waitFor, withServer,
} from '../e2e/lib.mjs';
import { expectClean, launch, screenshot, watch } from './browser.mjs';

const bin = binaryFromArgs();
const text = (page, sel) => page.$eval(sel, (n) => n.textContent.trim());
// (401: the wrong token; 400: the withdrawal over the balance.)
const expected4xx = (t) => /Failed to load resource: the server responded with a status of 40[01]\b/.test(t);

runMain('browser admin', async () => {
  // 127.0.0.1 as a trusted replica: a request carrying X-MB-Client-Address
  // is then taken as coming from that (remote) address.
  await withServer({ bin, name: 'serve', extraArgs: ['--trusted-replicas', '127.0.0.1'] }, async (srv) => {
    await step('GET /admin/ is the operator page, with no token', async () => {
      const r = await httpRequest('GET', `${srv.base}/admin/`);
      eq(r.status, 200, 'status');
      check(r.headers.get('content-type').startsWith('text/html'), `content type ${r.headers.get('content-type')}`);
      const root = await httpRequest('GET', `${srv.base}/`);
      eq(root.status, 200, 'GET / status');
      check(/<title>Matchbook<\/title>/.test(root.text), 'GET / is the trading page');
    });
    await step('the pages\' headers: type, ETag and 304, gzip, policy; other paths stay the API\'s', async () => {
      const page = await httpRequest('GET', `${srv.base}/trade.js`, { headers: { 'Accept-Encoding': 'gzip' } });
      eq(page.status, 200, 'trade.js status');
      eq(page.headers.get('content-type'), 'text/javascript; charset=utf-8', 'trade.js type');
      eq(page.headers.get('content-encoding'), 'gzip', 'trade.js encoding');
      eq(page.headers.get('cache-control'), 'no-cache', 'cache-control');
      const etag = page.headers.get('etag');
      check(/^"[0-9a-f]{32}\.gz"$/.test(etag), `strong ETag of the gzip copy: ${etag}`);
      const again = await httpRequest('GET', `${srv.base}/trade.js`, { headers: { 'Accept-Encoding': 'gzip', 'If-None-Match': etag } });
      eq(again.status, 304, 'If-None-Match with the current tag');
      eq(again.text, '', '304 body');
      const head = await httpRequest('HEAD', `${srv.base}/vendor/lightweight-charts.mjs`, { headers: { 'Accept-Encoding': 'identity' } });
      eq(head.status, 200, 'HEAD status');
      check(Number(head.headers.get('content-length')) > 100000, `HEAD Content-Length ${head.headers.get('content-length')}`);
      const root = await httpRequest('GET', `${srv.base}/`);
      const csp = root.headers.get('content-security-policy');
      const host = new URL(srv.base).host;
      check(csp && csp.includes("default-src 'none'") && csp.includes(`connect-src 'self' ws://${host} wss://${host};`), `policy: ${csp}`);
      const missing = await httpRequest('GET', `${srv.base}/nope.html`);
      eq(missing.status, 404, 'unknown path');
      eq(missing.json && missing.json.code, -1000, 'the API\'s JSON 404');
      const post = await httpRequest('POST', `${srv.base}/`);
      eq(post.status, 404, 'POST / is not a page');
      // From another machine: the trading page yes, the operator page no (as /admin/v1).
      const remote = { 'X-MB-Client-Address': '192.0.2.7' };
      eq((await httpRequest('GET', `${srv.base}/`, { headers: remote })).status, 200, 'the trading page from a remote client');
      const refused = await httpRequest('GET', `${srv.base}/admin/`, { headers: remote });
      eq(refused.status, 403, 'the operator page from a remote client');
      eq(refused.json && refused.json.msg, 'The operator page answers loopback clients only.', 'its message');
      eq((await httpRequest('GET', `${srv.base}/admin/admin.js`, { headers: remote })).status, 403, 'its script from a remote client');
      const bare = await fetch(`${srv.base}/admin`, { redirect: 'manual' });
      eq(bare.status, 308, '/admin redirects');
      eq(bare.headers.get('location'), '/admin/', 'to /admin/');
    });
    const browser = await launch();
    try {
      const { page: op } = await watch(browser, 'operator', { allow: expected4xx });
      const { page: tp } = await watch(browser, 'trader');
      await op.goto(`${srv.base}/admin/`);
      await step('a wrong token is refused with the server\'s message', async () => {
        await op.fill('#token', 'wrong');
        await op.click('#token-btn');
        await op.waitForFunction(() => document.querySelector('#token-error').textContent);
        eq(await text(op, '#token-error'), 'Missing or wrong admin token (X-MB-ADMIN-TOKEN).', 'token error');
        check(await op.$eval('#ops', (n) => n.hidden), 'nothing shown without the token');
      });
      await step('the token opens the page: health, readiness, markets', async () => {
        await op.fill('#token', srv.adminToken);
        await op.click('#token-btn');
        await op.waitForSelector('#ops:not([hidden])');
        await op.waitForFunction(() => document.querySelector('#health-status').textContent === 'ok');
        await op.waitForFunction(() => document.querySelector('#ready-status').textContent === 'ready');
        await op.waitForSelector('#markets tr[data-symbol="BTCUSDT"]');
      });
      let key;
      let secret;
      await step('create an account, an API key and a deposit', async () => {
        await op.fill('#account-name', 'carol');
        await op.click('#create-account');
        await op.waitForFunction(() => [...document.querySelectorAll('#accounts tbody tr')].some((r) => r.cells[1].textContent === 'carol'));
        const id = await op.$eval('#accounts tbody tr:last-child', (r) => r.dataset.accountId);
        await op.click(`#accounts tr[data-account-id="${id}"] button.new-key`);
        await op.waitForSelector('#new-key:not([hidden])');
        key = await text(op, '#new-key-value');
        secret = await text(op, '#new-key-secret');
        check(key.length > 0 && secret.length > 0, 'the new key and secret are shown');
        await op.selectOption('#transfer-account', id);
        await op.selectOption('#transfer-asset', 'USDT');
        await op.fill('#transfer-amount', '5000');
        await op.click('#deposit-btn');
        await op.waitForFunction(() => /^Deposit \d+/.test(document.querySelector('#ops-result').textContent));
        await op.waitForFunction((i) => /USDT 5000\.00000000 \/ 0\.00000000/.test(document.querySelector(`#accounts tr[data-account-id="${i}"] .balances`).textContent), id);
        await op.fill('#transfer-amount', '1000');
        await op.click('#withdraw-btn');
        await op.waitForFunction(() => /^Withdrawal \d+/.test(document.querySelector('#ops-result').textContent));
        await op.waitForFunction((i) => /USDT 4000\.00000000 \/ 0\.00000000/.test(document.querySelector(`#accounts tr[data-account-id="${i}"] .balances`).textContent), id);
        await op.fill('#transfer-amount', '99999');
        await op.click('#withdraw-btn');
        await op.waitForFunction(() => document.querySelector('#ops-error').textContent);
        eq(await text(op, '#ops-error'), 'Account has insufficient balance for requested action.', 'a withdrawal over the balance');
        await op.click('#new-key-done');
        check(await op.$eval('#new-key-secret', (n) => n.textContent === ''), 'the secret is gone from the page');
        const acct = await new RestClient(srv.base, { apiKey: key, secret }).signed('GET', '/api/v3/account');
        const usdt = acct.json.balances.find((b) => b.asset === 'USDT');
        eq(units(usdt.free), units('4000'), 'the deposit less the withdrawal, as the API reports them');
      });
      await step('the new key signs in on the trading page', async () => {
        await tp.goto(`${srv.base}/`);
        await tp.waitForFunction(() => performance.getEntriesByName('mb-interactive').length > 0);
        await tp.fill('#api-key', key);
        await tp.fill('#api-secret', secret);
        await tp.click('#signin-btn');
        await tp.waitForSelector('#signed-in:not([hidden])');
        check(!(await tp.$eval('#place-order', (b) => b.disabled)), 'the order button is enabled');
      });
      await step('the operator halts the market: the trading page shows it and refuses orders', async () => {
        await op.selectOption('#markets tr[data-symbol="BTCUSDT"] select.status-select', 'HALTED');
        await op.click('#markets tr[data-symbol="BTCUSDT"] button.apply');
        await op.waitForFunction(() => document.querySelector('#markets tr[data-symbol="BTCUSDT"] .status').textContent === 'HALTED');
        // The trading page polls exchangeInfo every 2 s; the bound leaves room
        // for a loaded machine (an ASan server beside the browser).
        await tp.waitForFunction(() => document.querySelector('#market-status').textContent === 'HALTED', null, { timeout: 20000 });
        check(await tp.$eval('#place-order', (b) => b.disabled), 'the order button is disabled');
        eq(await text(tp, '#form-error'), 'BTCUSDT is HALTED: new orders are refused.', 'the form says why');
        await tp.fill('#price', '100');
        await tp.fill('#qty', '1');
        await tp.evaluate(() => document.querySelector('#order-form').requestSubmit());
        await tp.waitForTimeout(300);
        const open = await new RestClient(srv.base, { apiKey: key, secret }).signed('GET', '/api/v3/openOrders');
        eq(open.json.length, 0, 'no order placed while halted');
        await screenshot(tp, 'trading-halted');
      });
      await step('trading again', async () => {
        await op.selectOption('#markets tr[data-symbol="BTCUSDT"] select.status-select', 'TRADING');
        await op.click('#markets tr[data-symbol="BTCUSDT"] button.apply');
        await tp.waitForFunction(() => document.querySelector('#market-status').textContent === 'TRADING', null, { timeout: 20000 });
        check(!(await tp.$eval('#place-order', (b) => b.disabled)), 'the order button is enabled again');
        eq(await text(tp, '#form-error'), '', 'no refusal text');
      });
      await step('a market listed at run time joins both pages\' market lists', async () => {
        const add = async (what, body) => {
          const r = await httpRequest('POST', `${srv.base}/admin/v1/${what}`, {
            headers: { 'X-MB-ADMIN-TOKEN': srv.adminToken, 'Content-Type': 'application/json' }, body: JSON.stringify(body),
          });
          eq(r.status, 200, `POST /admin/v1/${what}: ${r.text}`);
        };
        await add('assets', { symbol: 'SOL', scale: 9 });
        await add('markets', {
          symbol: 'SOLUSDT', base: 'SOL', quote: 'USDT', tick_size: '0.01', step_size: '0.001', min_qty: '0.001',
          max_qty: '1000', max_price: '10000', min_notional: '1', maker_fee_bps: 0, taker_fee_bps: 0,
        });
        await op.waitForSelector('#markets tr[data-symbol="SOLUSDT"]', { timeout: 20000 });
        await tp.waitForFunction(() => [...document.querySelector('#market').options].some((o) => o.value === 'SOLUSDT'), null, { timeout: 20000 });
        eq(await tp.$eval('#market option[value="SOLUSDT"]', (o) => o.textContent), 'SOL/USDT', 'the new option');
      });
      await step('revoke the key: the API refuses it', async () => {
        await op.click(`#accounts span.key[data-api-key="${key}"] button.revoke`);
        await op.waitForFunction(() => /revoked$/.test(document.querySelector('#ops-result').textContent));
        check(!(await op.$(`#accounts span.key[data-api-key="${key}"]`)), 'the key is gone from the table');
        const r = await new RestClient(srv.base, { apiKey: key, secret }).signed('GET', '/api/v3/account');
        eq(r.status, 401, 'a call with the revoked key');
      });

      await step('the server\'s metrics are drawn', async () => {
        await waitFor(async () => {
          const p = await op.evaluate(() => window.matchbookAdmin.points());
          return p.orders >= 2 && p.ring >= 2 && p.ws >= 2 && p.lag >= 2 && p.dropped >= 2;
        }, { timeout: 8000, what: 'two points on every metrics chart' });
        eq(await text(op, '#metrics-error'), '', 'metrics error');
        const ws = await op.evaluate(() => window.matchbookAdmin.points());
        log(`    chart points: ${JSON.stringify(ws)}`);
      });
      await step('screenshots', async () => {
        await screenshot(op, 'admin-light');
        const { page: dark } = await watch(browser, 'operator-dark', { colorScheme: 'dark' });
        await dark.goto(`${srv.base}/admin/`);
        await dark.fill('#token', srv.adminToken);
        await dark.click('#token-btn');
        await dark.waitForSelector('#ops:not([hidden])');
        await dark.waitForTimeout(3500);
        await screenshot(dark, 'admin-dark');
        expectClean(dark);
      });
      expectClean(op, tp);
    } finally {
      await browser.close();
    }
  });
});

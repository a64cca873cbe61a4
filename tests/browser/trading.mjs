// The trading page in a real browser: two traders in two browser contexts.
// A's limit buy shows on B's ladder; B sells into it and both see the trade
// (recent trades, chart), balances as the API reports them, A's order moves
// to the history with its fills; cancel and amend from the open-orders table;
// a market order by quote amount; and the refusals (wrong secret, price off
// the tick, more than the balance) show the server's message with nothing
// placed. No console error or failed request on either page.
//
// Usage: node trading.mjs <path to matchbook>

import {
  Admin, binaryFromArgs, check, eq, log, makeTrader, runMain, step, units, waitFor, withServer,
} from '../e2e/lib.mjs';
import { expectClean, ladder, launch, screenshot, watch } from './browser.mjs';

const bin = binaryFromArgs();
const SYMBOL = 'BTCUSDT';
// The browser logs each 4xx answer as a console error: these are the ones
// this test provokes on purpose.
// (400: the order refusals; 400 on sign-in: the wrong secret's signature).
const expected4xx = (text) => /Failed to load resource: the server responded with a status of 400\b/.test(text);

const text = (page, sel) => page.$eval(sel, (n) => n.textContent.trim());

async function signIn(page, trader, secret = trader.secret) {
  await page.fill('#api-key', trader.apiKey);
  await page.fill('#api-secret', secret);
  await page.click('#signin-btn');
}

async function openPage(browser, name, opts = {}) {
  const { context, page } = await watch(browser, name, opts);
  await page.goto(opts.base + '/');
  await page.waitForFunction(() => performance.getEntriesByName('mb-interactive').length > 0, null, { timeout: 10000 });
  return { context, page };
}

// Fills the order form and submits; resolves with {status, error} texts.
async function submitOrder(page, { side = 'BUY', type = 'LIMIT', price, qty, quoteQty, stopPrice, tif, postOnly = false }) {
  await page.check(side === 'BUY' ? '#side-buy' : '#side-sell');
  await page.selectOption('#order-type', type);
  if (type === 'MARKET') await page.selectOption('#amount-mode', quoteQty !== undefined ? 'quote' : 'base');
  if (type === 'LIMIT') await page.setChecked('#post-only', postOnly);
  if (price !== undefined) await page.fill('#price', price);
  if (stopPrice !== undefined) await page.fill('#stop-price', stopPrice);
  if (qty !== undefined) await page.fill('#qty', qty);
  if (quoteQty !== undefined) await page.fill('#quote-qty', quoteQty);
  if (tif) await page.selectOption('#tif', tif);
  await page.click('#place-order');
  await page.waitForFunction(() => document.querySelector('#form-status').textContent || document.querySelector('#form-error').textContent, null, { timeout: 10000 });
  return { status: await text(page, '#form-status'), error: await text(page, '#form-error') };
}

async function showTab(page, tab) {
  await page.click(`.account .tabs button[data-tab="${tab}"]`);
}

// The page's balances ({asset: {free, locked}} in units) equal the API's.
async function balancesMatch(page, trader) {
  const acc = (await trader.rest.signed('GET', '/api/v3/account')).json;
  const want = Object.fromEntries(acc.balances.map((b) => [b.asset, [units(b.free), units(b.locked)]]));
  return waitFor(async () => {
    const shown = await page.$$eval('#balances tbody tr', (rows) => rows.map((r) => [r.dataset.asset, r.querySelector('.free').textContent, r.querySelector('.locked').textContent]));
    for (const [asset, [free, locked]] of Object.entries(want)) {
      const row = shown.find((r) => r[0] === asset);
      if (!row || units(row[1]) !== free || units(row[2]) !== locked) return false;
    }
    return want;
  }, { timeout: 15000, what: `${trader.name}'s balances on the page equal GET /api/v3/account` });
}

async function openOrderIds(trader) {
  return (await trader.rest.signed('GET', '/api/v3/openOrders', { symbol: SYMBOL })).json.map((o) => o.orderId);
}

runMain('browser trading', async () => {
  await withServer({ bin, name: 'serve' }, async (srv) => {
    const admin = new Admin(srv);
    const A = await makeTrader(admin, srv, 'alice', { USDT: '100000' });
    const B = await makeTrader(admin, srv, 'bob', { BTC: '10', USDT: '1000' });
    const browser = await launch();
    try {
      const { page: pa } = await step('A opens the trading page', () => openPage(browser, 'A', { base: srv.base, allow: expected4xx }));
      const { page: pb } = await step('B opens it (dark)', () => openPage(browser, 'B', { base: srv.base, colorScheme: 'dark', allow: expected4xx }));
      await step('the page opens on the first market, public data without signing in', async () => {
        eq(await pa.$eval('#market', (s) => s.value), SYMBOL, 'selected market');
        eq(await text(pa, '#market-status'), 'TRADING', 'market status');
        check(await pa.$eval('#place-order', (b) => b.disabled), 'the order button is disabled before signing in');
      });

      await step('switch the interval and the market, and back', async () => {
        await pa.click('#intervals button[data-interval="1s"]');
        await pa.waitForSelector('#intervals button[data-interval="1s"].on');
        await pa.selectOption('#market', 'ETHUSDT');
        await pa.waitForFunction(() => window.matchbook.state.book.symbol === 'ETHUSDT' && window.matchbook.state.book.synced);
        eq(await text(pa, '#place-order'), 'Buy ETH', 'the form follows the market');
        // Back to the market and to 1m in one go, before the market's new
        // stream has opened: the interval change must reach it all the same
        // (the next steps wait for 1m candles from the stream).
        await pa.evaluate((s) => {
          const sel = document.querySelector('#market');
          sel.value = s;
          sel.dispatchEvent(new Event('change'));
          document.querySelector('#intervals button[data-interval="1m"]').click();
        }, SYMBOL);
        await pa.waitForSelector('#intervals button[data-interval="1m"].on');
        await pa.waitForFunction((s) => window.matchbook.state.book.symbol === s && window.matchbook.state.book.synced, SYMBOL);
        eq(await text(pa, '#place-order'), 'Buy BTC', 'and back');
      });

      await step('a wrong secret is refused with the server\'s message', async () => {
        await signIn(pa, A, 'not-the-secret');
        await pa.waitForFunction(() => document.querySelector('#signin-error').textContent.length > 0);
        eq(await text(pa, '#signin-error'), 'Signature for this request is not valid.', 'sign-in error');
        check(await pa.$eval('#signed-in', (n) => n.hidden), 'still signed out');
      });
      await step('both sign in; balances as the API reports them', async () => {
        await signIn(pa, A);
        await signIn(pb, B);
        await pa.waitForSelector('#signed-in:not([hidden])');
        await pb.waitForSelector('#signed-in:not([hidden])');
        eq(await pa.$eval('#api-secret', (n) => n.value), '', 'the secret field is cleared');
        await showTab(pa, 'balances');
        await showTab(pb, 'balances');
        await balancesMatch(pa, A);
        await balancesMatch(pb, B);
      });

      await step('A places a limit buy; B sees it on the ladder', async () => {
        const r = await submitOrder(pa, { side: 'BUY', price: '30000', qty: '0.5' });
        check(/NEW/.test(r.status), `A's order answer: ${JSON.stringify(r)}`);
        await pb.waitForFunction(() => [...document.querySelectorAll('#bids tr')].some((tr) => tr.querySelector('.price').textContent === '30000.00' && tr.querySelector('.qty').textContent === '0.50000'), null, { timeout: 15000 });
        await showTab(pa, 'open');
        await pa.waitForSelector('#open-orders tbody tr');
        await balancesMatch(pa, A);
      });

      await step('B sells into it: both see the trade, balances change as the API says', async () => {
        const r = await submitOrder(pb, { side: 'SELL', price: '30000', qty: '0.2' });
        check(/FILLED/.test(r.status), `B's order answer: ${JSON.stringify(r)}`);
        for (const p of [pa, pb]) {
          await p.waitForFunction(() => {
            const row = document.querySelector('#trades tr');
            return row && row.cells[0].textContent === '30000.00' && row.cells[1].textContent === '0.20000';
          }, null, { timeout: 15000 });
          await waitFor(async () => {
            const c = await p.evaluate(() => window.matchbook.candles().at(-1));
            return c && c.close === 30000;
          }, { timeout: 15000, what: 'the trade on the chart (last candle closes at 30000)' });
          eq(await text(p, '#last-price'), '30000.00', 'last price beside the ladder');
        }
        await balancesMatch(pa, A);
        await balancesMatch(pb, B);
        // A's order is partly filled: still open, with its fill shown.
        await pa.waitForFunction(() => document.querySelector('#open-orders tbody tr .filled')?.textContent === '0.20000');
      });

      await step('the rest fills: A\'s order moves to the history with its fills', async () => {
        const r = await submitOrder(pb, { side: 'SELL', type: 'MARKET', qty: '0.3' });
        check(/FILLED/.test(r.status), `B's market sell: ${JSON.stringify(r)}`);
        await pa.waitForFunction(() => document.querySelectorAll('#open-orders tbody tr').length === 0);
        await showTab(pa, 'history');
        await pa.waitForFunction(() => document.querySelector('#order-history tbody tr .status')?.textContent === 'FILLED');
        await showTab(pa, 'fills');
        const fills = (await A.rest.signed('GET', '/api/v3/myTrades', { symbol: SYMBOL })).json;
        eq(fills.length, 2, 'A\'s fills from the API');
        await pa.waitForFunction((n) => document.querySelectorAll('#fills tbody tr').length === n, fills.length);
        const shown = await pa.$$eval('#fills tbody tr', (rows) => rows.map((r) => [Number(r.dataset.tradeId), r.querySelector('.qty').textContent, r.querySelector('.fee').textContent]));
        for (const f of fills) {
          const row = shown.find((s) => s[0] === f.id);
          check(row, `fill ${f.id} on the page`);
          eq(units(row[1]), units(f.qty), `fill ${f.id} quantity`);
          eq(units(row[2].split(' ')[0]), units(f.commission), `fill ${f.id} fee`);
        }
        await showTab(pa, 'balances');
        await balancesMatch(pa, A);
        await balancesMatch(pb, B);
      });

      await step('cancel from the open-orders table', async () => {
        await showTab(pa, 'open');
        const r = await submitOrder(pa, { side: 'BUY', price: '29000', qty: '0.1' });
        check(/NEW/.test(r.status), JSON.stringify(r));
        const [id] = await openOrderIds(A);
        await pa.click(`#open-orders tr[data-order-id="${id}"] button.cancel`);
        await pa.waitForFunction((i) => !document.querySelector(`#open-orders tr[data-order-id="${i}"]`), id);
        eq((await openOrderIds(A)).length, 0, 'open orders after the cancel');
        await showTab(pa, 'history');
        await pa.waitForFunction((i) => document.querySelector(`#order-history tr[data-order-id="${i}"] .status`)?.textContent === 'CANCELED', id);
        await showTab(pa, 'open');
      });

      await step('amend from the table: quantity (keeps priority), then price', async () => {
        const r = await submitOrder(pa, { side: 'BUY', price: '29500', qty: '0.3' });
        check(/NEW/.test(r.status), JSON.stringify(r));
        const [id] = await openOrderIds(A);
        await pa.click(`#open-orders tr[data-order-id="${id}"] button.amend`);
        await pa.fill(`#open-orders tr[data-order-id="${id}"] input.amend-qty`, '0.2');
        await pa.click(`#open-orders tr[data-order-id="${id}"] button.amend-save`);
        await pa.waitForFunction((i) => document.querySelector(`#open-orders tr[data-order-id="${i}"] .qty`)?.textContent === '0.20000', id);
        const o = (await A.rest.signed('GET', '/api/v3/order', { symbol: SYMBOL, orderId: id })).json;
        eq(units(o.origQty), units('0.2'), 'amended quantity (API)');
        await pa.click(`#open-orders tr[data-order-id="${id}"] button.amend`);
        await pa.fill(`#open-orders tr[data-order-id="${id}"] input.amend-price`, '29600');
        await pa.click(`#open-orders tr[data-order-id="${id}"] button.amend-save`);
        await pa.waitForFunction(() => [...document.querySelectorAll('#open-orders tbody tr .price')].map((n) => n.textContent).join() === '29600.00');
        const open = (await A.rest.signed('GET', '/api/v3/openOrders', { symbol: SYMBOL })).json;
        eq(open.length, 1, 'one open order after the cancel-replace');
        eq(units(open[0].price), units('29600'), 'its price');
        eq(units(open[0].origQty), units('0.2'), 'its quantity');
        await pb.waitForFunction(() => document.querySelector('#bids tr .price')?.textContent === '29600.00');
      });

      await step('a market buy by quote amount', async () => {
        // A offers 0.1 BTC at 31000; B buys 620 USDT worth: 0.02 BTC.
        const r1 = await submitOrder(pa, { side: 'SELL', price: '31000', qty: '0.1' });
        check(/NEW/.test(r1.status), JSON.stringify(r1));
        await pb.waitForFunction(() => document.querySelector('#asks tr:last-child .price')?.textContent === '31000.00');
        const r = await submitOrder(pb, { side: 'BUY', type: 'MARKET', quoteQty: '620' });
        check(/FILLED/.test(r.status), `B's market buy by quote: ${JSON.stringify(r)}`);
        const trades = (await B.rest.signed('GET', '/api/v3/myTrades', { symbol: SYMBOL })).json;
        const last = trades.at(-1);
        eq(units(last.quoteQty), units('620'), 'quote spent');
        eq(units(last.qty), units('0.02'), 'quantity bought');
        await showTab(pb, 'balances');
        await balancesMatch(pb, B);
      });

      await step('refusals show the server\'s message and place nothing', async () => {
        const before = await openOrderIds(A);
        await pa.check('#side-buy');
        await pa.selectOption('#order-type', 'LIMIT');
        await pa.fill('#price', '30000.005');
        await pa.fill('#qty', '0.1');
        await pa.waitForFunction(() => /multiple of the tick 0\.01/.test(document.querySelector('#price-hint').textContent));
        let r = await submitOrder(pa, { side: 'BUY', price: '30000.005', qty: '0.1' });
        eq(r.error, 'Filter failure: PRICE_FILTER', 'price off the tick');
        r = await submitOrder(pa, { side: 'BUY', price: '30000', qty: '100' });
        check(/available/.test(await text(pa, '#qty-hint')), 'the balance hint');
        eq(r.error, 'Account has insufficient balance for requested action.', 'more than the balance');
        eq(JSON.stringify(await openOrderIds(A)), JSON.stringify(before), 'open orders unchanged');
      });

      await step('a stop-loss limit and an OCO from the form', async () => {
        await showTab(pb, 'open');
        let r = await submitOrder(pb, { side: 'SELL', type: 'STOP_LOSS_LIMIT', stopPrice: '25000', price: '24900', qty: '0.1', tif: 'GTC' });
        check(/^Order \d+ NEW/.test(r.status), `stop-loss limit: ${JSON.stringify(r)}`);
        await pb.selectOption('#order-type', 'OCO');
        await pb.fill('#stop-limit-price', '24800');
        r = await submitOrder(pb, { side: 'SELL', type: 'OCO', price: '35000', stopPrice: '25000', qty: '0.1', tif: 'GTC' });
        check(/^OCO list \d+ placed/.test(r.status), `OCO: ${JSON.stringify(r)}`);
        const open = (await B.rest.signed('GET', '/api/v3/openOrders', { symbol: SYMBOL })).json;
        eq(open.map((o) => o.type).sort().join(), 'LIMIT_MAKER,STOP_LOSS_LIMIT,STOP_LOSS_LIMIT', 'B\'s open orders (API)');
        await pb.waitForFunction(() => document.querySelectorAll('#open-orders tbody tr').length === 3);
      });

      await step('screenshots', async () => {
        await showTab(pa, 'open');
        await screenshot(pa, 'trading-light');
        await screenshot(pb, 'trading-dark');
      });

      await step('sign-out forgets the key', async () => {
        await pa.click('#signout-btn');
        await pa.waitForSelector('#signin:not([hidden])');
        check(await pa.evaluate(() => window.matchbook.state.signer === null), 'no signer after sign-out');
        eq(await pa.$$eval('#balances tbody tr', (r) => r.length), 0, 'balances cleared');
      });
      expectClean(pa, pb);
    } finally {
      await browser.close();
    }
  });
  log('browser trading: done');
});

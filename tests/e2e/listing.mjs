// Assets and markets added at run time (POST /admin/v1/assets, POST
// /admin/v1/markets), end to end, against a primary on a nats-server started
// here and a read replica:
//
//   - bad input: a symbol taken, a max_price that is not a multiple of the
//     tick, an unknown asset, a missing field, a scale out of range: each a
//     clear error, nothing journaled (the durable sequence does not move);
//   - the added market is in exchangeInfo at once (ccxt's loadMarkets sees
//     it), takes orders over REST (ccxt), trades, and its streams (trade,
//     depth) speak; the ledger of the projection has its trades;
//   - the replica serves it without a restart (exchangeInfo, depth);
//   - after a restart of the primary (its snapshot, then its journal) the
//     market, its book and the balances in the added asset are there, and
//     it trades again;
//   - delisting: CLOSED cancels the market's open orders and unlocks their
//     funds; the market stays listed (END_OF_DAY) and takes no order;
//   - the offline tools (journal dump, verify, project --rebuild, verify
//     --projection) name it and agree with the journal.
//
// Usage: node listing.mjs <path to matchbook>
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {
  Admin, WsClient, binaryFromArgs, check, deepEq, eq, expectOk, expectThrows, freePort, httpRequest, json, makeCcxt,
  makeTrader, runMain, startNats, startServer, step, waitFor,
} from './lib.mjs';

const bin = binaryFromArgs();

const SOLUSDT = {
  symbol: 'SOLUSDT', base: 'SOL', quote: 'USDT', tick_size: '0.01', step_size: '0.001', min_qty: '0.001',
  max_qty: '10000', max_price: '100000', min_notional: '1', maker_fee_bps: 5, taker_fee_bps: 10,
};

// Runs the binary to its exit: { code, stdout, stderr }.
async function run(args, timeoutMs = 30000) {
  const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (d) => { stdout += String(d); });
  proc.stderr.on('data', (d) => { stderr += String(d); });
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  const code = await new Promise((resolve) => proc.once('exit', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, stdout, stderr };
}

async function health(srv) {
  return expectOk(await httpRequest('GET', `${srv.base}/admin/v1/health`, { headers: { 'X-MB-ADMIN-TOKEN': srv.adminToken } }), `health of ${srv.base}`);
}

async function get(srv, pathname) {
  return expectOk(await httpRequest('GET', `${srv.base}/api/v3/${pathname}`), `GET ${pathname} on ${srv.base}`);
}

async function symbols(srv) {
  return (await get(srv, 'exchangeInfo')).symbols.map((s) => s.symbol);
}

runMain('listing', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'matchbook-listing-'));
  const nats = await startNats(await freePort(), path.join(tmp, 'nats'));
  const servers = [];
  const sockets = [];
  const limits = ['--weight-per-minute', '0', '--ip-weight-per-minute', '0'];
  try {
    let primary = await startServer({ bin, name: 'primary', extraArgs: ['--nats', nats.url, '--trusted-replicas', '127.0.0.1', ...limits] });
    servers.push(primary);
    const replica = await startServer({ bin, name: 'replica', command: 'replica', extraArgs: ['--nats', nats.url, '--primary', primary.base, '--bus-verify-key', path.join(primary.dataDir, 'bus.key.pub')] });
    servers.push(replica);
    let admin = new Admin(primary);

    await step('bad listings are refused with a clear error and journal nothing', async () => {
      const before = (await health(primary)).durableSequence;
      const refusals = [
        ['/markets', { ...SOLUSDT, symbol: 'BTCUSDT', base: 'BTC' }, 409, 'duplicate'],
        ['/markets', { ...SOLUSDT, base: 'BTC', max_price: '100000.005' }, 400, 'max_price: 100000.005 is not a multiple of tick_size 0.01'],
        ['/markets', SOLUSDT, 400, 'base: unknown asset "SOL"'],
        ['/markets', { ...SOLUSDT, base: 'BTC', tick_size: undefined }, 400, "'tick_size'"],
        ['/markets', { ...SOLUSDT, base: 'BTC', step_size: '0.000000001' }, 400, 'step_size'],
        ['/assets', { symbol: 'BTC', scale: 8 }, 409, 'duplicate'],
        ['/assets', { symbol: 'SOL', scale: 19 }, 400, 'scale'],
        ['/assets', { symbol: 'sol', scale: 9 }, 400, 'uppercase'],
      ];
      for (const [where, body, status, words] of refusals) {
        const r = await admin.request('POST', where, body);
        eq(r.status, status, `POST ${where} ${json(body)}: HTTP status (${r.text})`);
        check(r.json && r.json.msg.includes(words), `POST ${where} ${json(body)}: the message does not say "${words}": ${r.text}`);
      }
      eq((await health(primary)).durableSequence, before, 'durable sequence after the refusals');
      deepEq(await symbols(primary), ['BTCUSDT', 'ETHUSDT', 'ETHBTC'], 'markets after the refusals');
    });

    await step('an unknown market has no streams yet', async () => {
      const ws = await WsClient.connect(`${primary.wsBase}/ws`);
      sockets.push(ws);
      const r = await ws.request('SUBSCRIBE', ['solusdt@trade']);
      check(r.error && r.error.code === 2, `SUBSCRIBE to a market not listed: ${json(r)}`);
      ws.close();
    });

    let ws;
    let alice;
    let bob;
    await step('an asset and a market are added, journaled and served at once', async () => {
      const a = expectOk(await admin.request('POST', '/assets', { symbol: 'SOL', scale: 9 }), 'POST /assets SOL');
      deepEq(a, { asset: 'SOL', assetId: 3, scale: 9 }, 'the added asset');
      const m = expectOk(await admin.request('POST', '/markets', SOLUSDT), 'POST /markets SOLUSDT');
      eq(m.symbol, 'SOLUSDT', 'symbol');
      eq(m.marketId, 3, 'marketId');
      eq(m.tick_size, '0.01', 'tick_size');
      eq(m.max_price, '100000', 'max_price');
      eq(m.status, 'TRADING', 'status');
      deepEq(await symbols(primary), ['BTCUSDT', 'ETHUSDT', 'ETHBTC', 'SOLUSDT'], 'exchangeInfo after the listing');
      const info = (await get(primary, 'exchangeInfo?symbol=SOLUSDT')).symbols[0];
      eq(info.baseAsset, 'SOL', 'baseAsset');
      eq(info.baseAssetPrecision, 9, 'baseAssetPrecision');
      const lot = info.filters.find((f) => f.filterType === 'LOT_SIZE');
      eq(Number(lot.stepSize), 0.001, 'LOT_SIZE stepSize');
      ws = await WsClient.connect(`${primary.wsBase}/stream?streams=solusdt@trade/solusdt@depth@100ms`);
      sockets.push(ws);
      alice = await makeTrader(admin, primary, 'alice', { SOL: '100' });
      bob = await makeTrader(admin, primary, 'bob', { USDT: '100000' });
    });

    await step('ccxt sees the new market and trades it; its streams speak', async () => {
      const exA = makeCcxt(primary, { apiKey: alice.apiKey, secret: alice.secret });
      const exB = makeCcxt(primary, { apiKey: bob.apiKey, secret: bob.secret });
      await Promise.all([exA.loadMarkets(true), exB.loadMarkets(true)]);
      const m = exA.market('SOL/USDT');
      eq(m.id, 'SOLUSDT', 'ccxt market id');
      eq(m.precision.price, 0.01, 'ccxt precision.price');
      eq(m.limits.cost.min, 1, 'ccxt limits.cost.min');
      const sell = await exA.createOrder('SOL/USDT', 'limit', 'sell', 2, 150.25);
      eq(sell.status, 'open', 'the resting sell');
      const buy = await exB.createOrder('SOL/USDT', 'limit', 'buy', 1.5, 150.25);
      eq(buy.status, 'closed', 'the crossing buy');
      eq(buy.filled, 1.5, 'filled');
      const trade = await ws.waitMessage((x) => x.stream === 'solusdt@trade', 5000, 'the trade on solusdt@trade');
      eq(trade.data.p, '150.25000000', 'trade price on the stream');
      eq(trade.data.q, '1.500000000', 'trade quantity on the stream');
      await ws.waitMessage((x) => x.stream === 'solusdt@depth@100ms' && x.data.a.length > 0, 5000, 'a depth update of solusdt');
      const book = await get(primary, 'depth?symbol=SOLUSDT');
      deepEq(book.asks, [['150.25000000', '0.500000000']], 'the book after the trade');
      const bal = await exB.fetchBalance();
      eq(bal.SOL.free, 1.4985, "bob's SOL after the 0.1% taker fee");
      // The projection: the trade's ledger lines (SOL and USDT) are there.
      await waitFor(async () => {
        const r = await admin.request('GET', `/accounts/${bob.accountId}/ledger`);
        return r.status === 200 && r.json.entries.some((l) => l.asset === 'SOL' && l.reason === 'TradeReceive');
      }, { timeout: 10000, what: "bob's SOL in the projection's ledger" });
    });

    await step('the replica serves the market without a restart', async () => {
      const durable = (await health(primary)).durableSequence;
      await waitFor(async () => (await health(replica)).appliedSequence >= durable, { timeout: 20000, what: `the replica at record ${durable}` });
      deepEq(await symbols(replica), await symbols(primary), 'exchangeInfo on the replica');
      deepEq(await get(replica, 'depth?symbol=SOLUSDT'), await get(primary, 'depth?symbol=SOLUSDT'), 'SOLUSDT depth on the replica');
      const rws = await WsClient.connect(`${replica.wsBase}/ws`);
      sockets.push(rws);
      await rws.subscribe(['solusdt@trade']);
      rws.close();
    });

    await step('after a restart the market, its book and the SOL balances are there', async () => {
      const bookBefore = await get(primary, 'depth?symbol=SOLUSDT');
      ws.close();
      await primary.stop({ keepDataDir: true });
      servers.splice(servers.indexOf(primary), 1);
      primary = await startServer({ bin, name: 'primary', dataDir: primary.dataDir, extraArgs: ['--nats', nats.url, '--trusted-replicas', '127.0.0.1', ...limits] });
      servers.push(primary);
      admin = new Admin(primary);
      deepEq(await symbols(primary), ['BTCUSDT', 'ETHUSDT', 'ETHBTC', 'SOLUSDT'], 'exchangeInfo after the restart');
      deepEq((await get(primary, 'depth?symbol=SOLUSDT')).asks, bookBefore.asks, 'the SOLUSDT book after the restart');
      const b = (await admin.account(bob.accountId)).balances.find((x) => x.asset === 'SOL');
      eq(b.free, '1.498500000', "bob's SOL after the restart");
      const exB = makeCcxt(primary, { apiKey: bob.apiKey, secret: bob.secret });
      await exB.loadMarkets(true);
      const again = await exB.createOrder('SOL/USDT', 'limit', 'buy', 0.5, 150.25);
      eq(again.status, 'closed', 'a buy against the restored book');
    });

    await step('delisting: CLOSED cancels its open orders and unlocks their funds; the market stays listed', async () => {
      const exA = makeCcxt(primary, { apiKey: alice.apiKey, secret: alice.secret });
      await exA.loadMarkets(true);
      const resting = await exA.createOrder('SOL/USDT', 'limit', 'sell', 3, 160);
      eq(resting.status, 'open', 'a resting sell before the close');
      const locked = (await admin.account(alice.accountId)).balances.find((x) => x.asset === 'SOL');
      eq(locked.locked, '3.000000000', "alice's SOL locked by the order");
      const r = expectOk(await admin.request('POST', '/markets/SOLUSDT/status', { status: 'CLOSED' }), 'close SOLUSDT');
      eq(r.status, 'CLOSED', 'the answer');
      const after = (await admin.account(alice.accountId)).balances.find((x) => x.asset === 'SOL');
      eq(after.locked, '0.000000000', "alice's SOL after the close");
      const order = await exA.fetchOrder(resting.id, 'SOL/USDT');
      eq(order.status, 'canceled', 'the resting order after the close');
      const info = (await get(primary, 'exchangeInfo?symbol=SOLUSDT')).symbols[0];
      eq(info.status, 'END_OF_DAY', 'exchangeInfo status of a closed market');
      deepEq((await get(primary, 'depth?symbol=SOLUSDT')).asks, [], 'the closed book');
      // An order that would rest on an open market.
      await expectThrows(() => exA.createOrder('SOL/USDT', 'limit', 'sell', 1, 160), Error, 'an order on the closed market');
    });

    await step('the offline tools name the market: journal dump, verify, project --rebuild', async () => {
      await primary.stop({ keepDataDir: true });
      servers.splice(servers.indexOf(primary), 1);
      const dir = primary.dataDir;
      const dump = await run(['journal', 'dump', '--data-dir', dir]);
      eq(dump.code, 0, `journal dump exit (${dump.stderr.slice(-300)})`);
      check(/MarketAdded market=3 SOLUSDT/.test(dump.stdout), 'journal dump: no "MarketAdded market=3 SOLUSDT"');
      check(/Trade id=1 SOLUSDT 1\.500000000 @ 150\.25000000/.test(dump.stdout) && /OrderAccepted .* SOLUSDT SELL LIMIT 2\.000000000/.test(dump.stdout),
        `journal dump does not name SOLUSDT in its orders and trades: ${dump.stdout.split('\n').filter((l) => l.includes('SOL')).slice(0, 5).join(' | ')}`);
      const verify = await run(['verify', '--data-dir', dir]);
      eq(verify.code, 0, `verify exit (${verify.stdout.slice(-300)} ${verify.stderr.slice(-300)})`);
      const rebuild = await run(['project', '--rebuild', '--data-dir', dir]);
      eq(rebuild.code, 0, `project --rebuild exit (${rebuild.stderr.slice(-300)})`);
      const same = await run(['verify', '--projection', '--data-dir', dir]);
      eq(same.code, 0, `verify --projection exit (${same.stdout.slice(-400)} ${same.stderr.slice(-300)})`);
      check(same.stdout.includes('ok (equals the journal)'), `verify --projection: ${same.stdout.slice(-300)}`);
      fs.rmSync(dir, { recursive: true, force: true });
    });
  } finally {
    for (const s of sockets) s.close();
    for (const s of servers.reverse()) {
      try {
        await s.stop();
      } catch (e) {
        console.error(`(stopping ${s.base}: ${e.message.split('\n')[0]})`);
      }
    }
    await nats.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

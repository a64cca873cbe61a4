// Read replicas end to end, against a nats-server started here: a primary
// (`matchbook serve --nats`) and replicas (`matchbook replica --nats`).
//
//   - a replica's REST market data and WebSocket streams equal the primary's
//     at the same sequence after a random trading run on every market, half
//     of whose orders went through the replica (forwarded to the primary);
//   - a replica started in the middle of trading (from a snapshot on the bus)
//     converges to the primary's books;
//   - a replica SIGKILLed and restarted resumes and converges, no record
//     applied twice;
//   - NATS down for 10 s: orders still acknowledged by the primary, its bus
//     lag grows; NATS back, the publisher and the replicas catch up;
//   - bad input: an unreachable NATS, a replica of another configuration,
//     a malformed --primary; operator calls and private WebSocket API calls
//     on a replica get clear refusals.
//
// Usage: node replica.mjs <path to matchbook>
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {
  Admin, RestClient, WsClient, binaryFromArgs, check, deepEq, eq, expectOk, freePort, hmacHex, httpRequest, json, log,
  makeTrader, rng, runMain, seedFromEnv, sleep, startNats, startServer, step, waitFor,
} from './lib.mjs';

const bin = binaryFromArgs();
const SYMBOLS = ['BTCUSDT', 'ETHUSDT', 'ETHBTC'];
// Mid price in ticks, quantity range in steps, tick and step decimals.
const MARKETS = {
  BTCUSDT: { mid: 3000000, tick: 2, step: 5, qty: [100, 5000] },
  ETHUSDT: { mid: 200000, tick: 2, step: 4, qty: [100, 5000] },
  ETHBTC: { mid: 6500, tick: 5, step: 3, qty: [100, 2000] },
};
const ORDERS = 600;

function fixed(units, decimals) {
  const s = String(units).padStart(decimals + 1, '0');
  return decimals === 0 ? s : `${s.slice(0, -decimals)}.${s.slice(-decimals)}`;
}

// Resolves the close of a WebSocket the server ends (at most 5 s).
async function withTimeoutClosed(ws) {
  const timer = new Promise((_, reject) => setTimeout(() => reject(new Error(`${ws.url} not closed in 5 s`)), 5000));
  return Promise.race([ws.closedPromise, timer]);
}

// Runs the binary to its exit; resolves { code, stderr } (code null: killed
// after timeoutMs).
async function runToExit(args, timeoutMs = 20000) {
  const proc = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += String(d); });
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  const code = await new Promise((resolve) => proc.once('exit', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, stderr };
}

async function health(srv) {
  return expectOk(await httpRequest('GET', `${srv.base}/admin/v1/health`, { headers: { 'X-MB-ADMIN-TOKEN': srv.adminToken } }), `health of ${srv.base}`);
}

// Waits until every replica has applied what the primary made durable.
async function converge(primary, replicas, what, timeout = 20000) {
  const durable = (await health(primary)).durableSequence;
  for (const r of replicas) {
    let last;
    await waitFor(async () => (last = (await health(r)).replica).appliedSequence >= durable,
      { timeout, what: `${what}: replica ${r.base} at record ${durable}`, describe: () => json(last) });
    const h = await health(r);
    eq(h.replica.appliedSequence, durable, `${what}: replica appliedSequence`);
    eq(h.appliedSequence, durable, `${what}: replica read side`);
  }
  return durable;
}

async function rest(srv, pathname) {
  return expectOk(await httpRequest('GET', `${srv.base}/api/v3/${pathname}`), `GET ${pathname} on ${srv.base}`);
}

// Every public REST answer of every market, the same on both servers.
async function sameRest(primary, replica, what, { booksOnly = false } = {}) {
  for (const s of SYMBOLS) {
    const a = await rest(primary, `depth?symbol=${s}&limit=5000`);
    const b = await rest(replica, `depth?symbol=${s}&limit=5000`);
    deepEq(b.bids, a.bids, `${what}: ${s} depth bids`);
    deepEq(b.asks, a.asks, `${what}: ${s} depth asks`);
    if (booksOnly) continue;
    eq(b.lastUpdateId, a.lastUpdateId, `${what}: ${s} depth lastUpdateId`);
    for (const p of [`trades?symbol=${s}&limit=1000`, `aggTrades?symbol=${s}&limit=1000`,
      `klines?symbol=${s}&interval=1m&limit=1000`, `klines?symbol=${s}&interval=1h`,
      `klines?symbol=${s}&interval=1s&limit=1000`, `avgPrice?symbol=${s}`, `ticker/price?symbol=${s}`,
      `ticker/bookTicker?symbol=${s}`]) {
      deepEq(await rest(replica, p), await rest(primary, p), `${what}: ${p}`);
    }
    const ta = await rest(primary, `ticker/24hr?symbol=${s}`);
    const tb = await rest(replica, `ticker/24hr?symbol=${s}`);
    for (const k of ['lastPrice', 'openPrice', 'highPrice', 'lowPrice', 'volume', 'quoteVolume', 'count', 'firstId', 'lastId', 'bidPrice', 'askPrice']) {
      eq(tb[k], ta[k], `${what}: ${s} ticker/24hr ${k}`);
    }
  }
  const ia = await rest(primary, 'exchangeInfo');
  const ib = await rest(replica, 'exchangeInfo');
  deepEq(ib.symbols, ia.symbols, `${what}: exchangeInfo symbols`);
}

// Equal lists, or the first difference named (not two whole dumps).
function sameList(actual, expected, what) {
  for (const key of new Set([...Object.keys(expected), ...Object.keys(actual)])) {
    const a = actual[key] ?? [];
    const e = expected[key] ?? [];
    for (let i = 0; i < Math.max(a.length, e.length); i++) {
      if (JSON.stringify(a[i]) !== JSON.stringify(e[i])) {
        check(false, `${what} ${key}[${i}] of ${e.length}: replica ${json(a[i])}, primary ${json(e[i])}`);
      }
    }
  }
}

function streamNames() {
  const out = [];
  for (const s of SYMBOLS.map((x) => x.toLowerCase())) {
    out.push(`${s}@trade`, `${s}@aggTrade`, `${s}@depth@100ms`, `${s}@depth5@100ms`, `${s}@kline_1m`,
      `${s}@bookTicker`, `${s}@ticker`, `${s}@miniTicker`, `${s}@ticker_1h`, `${s}@avgPrice`);
  }
  out.push('!ticker@arr');
  return out;
}

// What a combined-stream subscriber saw, reduced to what must agree whatever
// the batching: every trade and aggregate, the book the diffs build (with
// the last u), each candle's last state, the last book ticker and ticker.
function digest(ws) {
  const d = { trades: {}, aggs: {}, books: {}, candles: {}, bookTickers: {}, tickers: {}, minis: {}, partial: {}, windows: {}, avg: {}, all: {} };
  const stats = (x) => ({ c: x.c, o: x.o, h: x.h, l: x.l, v: x.v, q: x.q, n: x.n, F: x.F, L: x.L });
  for (const m of ws.messages) {
    if (!m.stream) continue;
    if (m.stream === '!ticker@arr') {
      for (const x of m.data) d.all[x.s] = stats(x);
      continue;
    }
    const [sym, type] = m.stream.split('@');
    const x = m.data;
    if (type === 'trade') (d.trades[sym] ??= []).push(x);
    else if (type === 'aggTrade') (d.aggs[sym] ??= []).push(x);
    else if (type === 'depth') {
      const b = (d.books[sym] ??= { bids: new Map(), asks: new Map(), u: null });
      if (b.u !== null) check(x.U === b.u + 1, `${sym} depth chain: U=${x.U} after u=${b.u}`);
      for (const [p, q] of x.b) { if (Number(q) === 0) b.bids.delete(p); else b.bids.set(p, q); }
      for (const [p, q] of x.a) { if (Number(q) === 0) b.asks.delete(p); else b.asks.set(p, q); }
      b.u = x.u;
    } else if (type === 'kline_1m') (d.candles[`${sym} ${x.k.t}`] = { ...x.k });
    // u: the depth id of the batch that moved the top, which depends on
    // where batches end; the prices and quantities do not.
    else if (type === 'bookTicker') d.bookTickers[sym] = { b: x.b, B: x.B, a: x.a, A: x.A };
    else if (type === 'ticker') d.tickers[sym] = stats(x);
    else if (type === 'ticker_1h') d.windows[sym] = stats(x);
    else if (type === 'depth5') d.partial[sym] = x;  // {lastUpdateId, bids, asks}: the last one
    else if (type === 'avgPrice') d.avg[sym] = x.w;
    else if (type === 'miniTicker') d.minis[sym] = { c: x.c, o: x.o, h: x.h, l: x.l, v: x.v, q: x.q };
  }
  for (const b of Object.values(d.books)) {
    b.bids = [...b.bids.entries()].sort((p, q) => Number(q[0]) - Number(p[0]));
    b.asks = [...b.asks.entries()].sort((p, q) => Number(p[0]) - Number(q[0]));
  }
  // Keys in one order, whichever market spoke first.
  for (const k of Object.keys(d)) d[k] = Object.fromEntries(Object.entries(d[k]).sort());
  return d;
}

runMain('replica', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'matchbook-replica-'));
  const natsPort = await freePort();
  let nats = await startNats(natsPort, path.join(tmp, 'nats'));
  const servers = [];
  try {
    await step('bad input is refused before anything is served', async () => {
      const dead = await freePort();
      const someKey = ['--bus-verify-key', 'ab'.repeat(32)];
      const r = await runToExit(['replica', '--nats', `nats://127.0.0.1:${dead}`, ...someKey, '--data-dir', path.join(tmp, 'dead'), '--port', '0']);
      check(r.code === 1, `a replica of an unreachable NATS exited ${r.code} (1 expected)`);
      check(r.stderr.includes(`127.0.0.1:${dead}`), `unclear refusal of an unreachable NATS: ${r.stderr.slice(-400)}`);
      const p = await runToExit(['replica', '--nats', nats.url, ...someKey, '--primary', 'https://example.org:443/api', '--data-dir', path.join(tmp, 'p'), '--port', '0']);
      const k = await runToExit(['replica', '--nats', nats.url, '--data-dir', path.join(tmp, 'k'), '--port', '0']);
      check(k.code === 1 && k.stderr.includes('--bus-verify-key'), `a replica without the bus key: exit ${k.code}, ${k.stderr.slice(-300)}`);
      const b = await runToExit(['replica', '--nats', nats.url, '--bus-verify-key', 'abcd', '--data-dir', path.join(tmp, 'b'), '--port', '0']);
      check(b.code === 1 && b.stderr.includes('verify_key'), `a replica with a malformed bus key: exit ${b.code}, ${b.stderr.slice(-300)}`);
      check(p.code === 1 && p.stderr.includes('--primary: primary "https://example.org:443/api" is not http(s)://HOST:PORT'),
        `--primary https://...: exit ${p.code}, ${p.stderr.slice(-300)}`);
      const n = await runToExit(['replica', '--data-dir', path.join(tmp, 'n'), '--port', '0']);
      check(n.code === 1 && n.stderr.includes('--nats'), `a replica without --nats: exit ${n.code}, ${n.stderr.slice(-300)}`);
    });

    const primary = await startServer({ bin, name: 'primary', extraArgs: ['--nats', nats.url, '--trusted-replicas', '127.0.0.1', '--weight-per-minute', '0', '--ip-weight-per-minute', '0'] });
    servers.push(primary);
    const replicaArgs = ['--nats', nats.url, '--primary', primary.base, '--bus-verify-key', path.join(primary.dataDir, 'bus.key.pub')];
    let replicaA = await startServer({ bin, name: 'replica-a', command: 'replica', extraArgs: replicaArgs });
    servers.push(replicaA);

    await step('a replica of another configuration is refused and says why', async () => {
      const other = path.join(tmp, 'other.toml');
      const text = fs.readFileSync(new URL('../../config/matchbook.toml', import.meta.url), 'utf8');
      fs.writeFileSync(other, text.replace('maker_fee_bps = 10', 'maker_fee_bps = 11'));
      const r = await runToExit(['replica', '--config', other, '--nats', nats.url, ...replicaArgs.slice(-2), '--data-dir', path.join(tmp, 'other'), '--port', '0']);
      check(r.code === 1, `a replica of another configuration exited ${r.code} (1 expected)`);
      check(r.stderr.includes('--config'), `unclear refusal of another configuration: ${r.stderr.slice(-400)}`);
      // The primary's own data directory (locked, and a primary's).
      const same = await runToExit(['replica', '--nats', nats.url, ...replicaArgs.slice(-2), '--data-dir', primary.dataDir, '--port', '0']);
      check(same.code === 1, `a replica in the primary's data directory exited ${same.code} (1 expected)`);
      check(/in use|holds a journal|locked/.test(same.stderr), `unclear refusal of the primary's data directory: ${same.stderr.slice(-400)}`);
      check(fs.readdirSync(path.join(primary.dataDir, 'journal')).length > 0, 'the primary\'s journal is intact');
    });

    const admin = new Admin(primary);
    const deposits = { BTC: '100', ETH: '2000', USDT: '10000000' };
    const traders = [await makeTrader(admin, primary, 'alice', deposits), await makeTrader(admin, primary, 'bob', deposits)];
    // Every other order goes through the replica, which forwards it.
    for (const t of traders) t.viaReplica = new RestClient(replicaA.base, { apiKey: t.apiKey, secret: t.secret });

    const names = streamNames();
    const wsP = await WsClient.connect(`${primary.wsBase}/stream?streams=${names.join('/')}`);
    const wsA = await WsClient.connect(`${replicaA.wsBase}/stream?streams=${names.join('/')}`);

    const rand = rng(seedFromEnv());
    const open = [];
    const errors = [];
    let replicaB = null;
    async function order(i) {
      const trader = traders[i % 2];
      const client = i % 4 < 2 ? trader.viaReplica : trader.rest;
      if (rand() < 0.12 && open.length > 0) {
        const [o] = open.splice(Math.floor(rand() * open.length), 1);
        const res = await client.signed('DELETE', '/api/v3/order', { symbol: o.symbol, orderId: o.orderId });
        if (res.status !== 200 && !(res.json && res.json.code === -2011)) errors.push(`cancel: ${res.status} ${res.text.slice(0, 200)}`);
        return;
      }
      const symbol = SYMBOLS[rand.int(0, SYMBOLS.length - 1)];
      const m = MARKETS[symbol];
      const buy = rand() < 0.5;
      const crossing = rand() < 0.3;
      const ticks = m.mid + (buy === crossing ? 1 : -1) * rand.int(0, crossing ? 30 : 200);
      const params = { symbol, side: buy ? 'BUY' : 'SELL', type: 'LIMIT', timeInForce: 'GTC', quantity: fixed(rand.int(m.qty[0], m.qty[1]), m.step), price: fixed(ticks, m.tick), newOrderRespType: 'RESULT' };
      const res = await client.signed('POST', '/api/v3/order', params);
      if (res.status !== 200) {
        errors.push(`order ${json(params)}: ${res.status} ${res.text.slice(0, 200)}`);
        return;
      }
      if (res.json.status === 'NEW' || res.json.status === 'PARTIALLY_FILLED') open.push({ symbol, orderId: res.json.orderId });
    }
    await step(`a random run of ${ORDERS} orders, half through the replica; a second replica joins half-way`, async () => {
      let next = 0;
      const worker = async () => {
        for (;;) {
          const i = next++;
          if (i >= ORDERS) return;
          if (i === ORDERS / 2) {
            expectOk(await admin.request('POST', '/snapshot', {}), 'snapshot');
            await waitFor(async () => (await health(primary)).bus.snapshotSequence > 0, { timeout: 15000, what: 'a snapshot on the bus' });
            replicaB = await startServer({ bin, name: 'replica-b', command: 'replica', extraArgs: replicaArgs });
            servers.push(replicaB);
            const hb = await health(replicaB);
            check(hb.replica.snapshotSequence > 0, `replica B booted from no snapshot: ${json(hb.replica)}`);
          }
          await order(i);
        }
      };
      await Promise.all([worker(), worker(), worker()]);
      check(errors.length === 0, `orders failed: ${errors.slice(0, 5).join('; ')}`);
    }, 120000);

    await step('the replicas apply every record; REST and streams equal the primary\'s', async () => {
      await converge(primary, [replicaA, replicaB], 'after the run');
      await sleep(1500);  // the throttled streams' last messages
      await sameRest(primary, replicaA, 'replica A');
      await sameRest(primary, replicaB, 'replica B (joined mid-run)', { booksOnly: true });
      const dp = digest(wsP);
      const da = digest(wsA);
      check(Object.keys(dp.trades).length === SYMBOLS.length, `trades on ${Object.keys(dp.trades)} only`);
      sameList(da.trades, dp.trades, 'trade stream');
      sameList(da.aggs, dp.aggs, 'aggTrade stream');
      deepEq(da.candles, dp.candles, 'kline_1m streams (each candle\'s last state)');
      deepEq(da.bookTickers, dp.bookTickers, 'bookTicker streams (last)');
      deepEq(da.tickers, dp.tickers, 'ticker streams (last)');
      deepEq(da.minis, dp.minis, 'miniTicker streams (last)');
      deepEq(da.windows, dp.windows, 'ticker_1h streams (last)');
      deepEq(da.all, dp.all, '!ticker@arr stream (last of each market)');
      deepEq(da.avg, dp.avg, 'avgPrice streams (last)');
      deepEq(da.partial, dp.partial, 'depth5 streams (last, with lastUpdateId)');
      for (const [name, seen] of Object.entries({ partial: dp.partial, avg: dp.avg, windows: dp.windows, all: dp.all, tickers: dp.tickers, candles: dp.candles })) {
        check(Object.keys(seen).length >= SYMBOLS.length, `the primary sent ${name} of ${Object.keys(seen)} only`);
      }
      for (const s of SYMBOLS) {
        const k = s.toLowerCase();
        deepEq(da.books[k], dp.books[k], `${s} book built from the depth stream`);
        const d = await rest(primary, `depth?symbol=${s}&limit=5000`);
        eq(dp.books[k].u, d.lastUpdateId, `${s} last depth u = REST lastUpdateId`);
      }
      const h = await health(replicaA);
      check(h.forwarding.forwarded > 0, `nothing was forwarded: ${json(h.forwarding)}`);
      eq(h.replica.duplicates, 0, 'records received twice');
      eq(h.replica.resyncs, 0, 'resynchronisations');
      const ready = await httpRequest('GET', `${replicaB.base}/admin/v1/ready`, { headers: { 'X-MB-ADMIN-TOKEN': replicaB.adminToken } });
      eq(ready.status, 200, 'replica B ready once caught up');
      // What a replica does not do.
      const op = await httpRequest('POST', `${replicaA.base}/admin/v1/accounts`, { headers: { 'X-MB-ADMIN-TOKEN': replicaA.adminToken, 'Content-Type': 'application/json' }, body: '{"name":"x"}' });
      eq(op.status, 409, 'an operator call on a replica');
      check(/read replica/.test(op.text), `unclear refusal: ${op.text}`);
      // The same account through either server.
      const viaP = await traders[0].rest.signed('GET', '/api/v3/account');
      const viaA = await traders[0].viaReplica.signed('GET', '/api/v3/account');
      deepEq(viaA.json.balances, viaP.json.balances, 'account through the replica');
    });
    wsP.ws.close();
    wsA.ws.close();

    await step('user data and the WebSocket API through a replica reach the primary', async () => {
      const t = traders[0];
      const lk = expectOk(await httpRequest('POST', `${replicaA.base}/api/v3/userDataStream`, { headers: { 'X-MBX-APIKEY': t.apiKey } }), 'listen key through the replica');
      check(typeof lk.listenKey === 'string', `no listenKey: ${json(lk)}`);
      const user = await WsClient.connect(`${replicaA.wsBase}/ws/${lk.listenKey}`);
      // Live once the replica's own connection to the primary is open.
      await waitFor(async () => (await health(replicaA)).forwarding.tunnels >= 1, { timeout: 5000, what: 'the user-data tunnel open' });
      const placed = expectOk(await t.rest.signed('POST', '/api/v3/order', { symbol: 'BTCUSDT', side: 'BUY', type: 'LIMIT', timeInForce: 'GTC', quantity: '0.00100', price: '29000.00' }), 'an order for the user stream');
      const report = await user.waitMessage((m) => m.e === 'executionReport' && m.i === placed.orderId, 5000, 'its executionReport through the replica');
      eq(report.X, 'NEW', 'executionReport status');
      user.ws.close();
      // A key the primary does not know: the tunnel is closed with the reason.
      const bogus = await WsClient.connect(`${replicaA.wsBase}/ws/${'x'.repeat(60)}`);
      const closed = await withTimeoutClosed(bogus);
      check(closed.code === 1008 && /refused/.test(closed.reason), `unknown listen key: ${json(closed)}`);

      const api = await WsClient.connect(`${replicaA.wsBase}/ws-api/v3`);
      const ping = await api.request('ping', {});
      eq(ping.status, 200, 'ws-api ping through the replica');
      const open = (await health(replicaA)).forwarding.tunnels;
      check(open >= 1, `the WebSocket API tunnel is not counted in health: ${open}`);
      const params = { apiKey: t.apiKey, timestamp: Date.now() };
      const text = Object.keys(params).sort().map((k) => `${k}=${params[k]}`).join('&');
      const acct = await api.request('account.status', { ...params, signature: hmacHex(t.secret, text) });
      eq(acct.status, 200, `ws-api account.status through the replica: ${json(acct)}`);
      deepEq(acct.result.balances, (await t.rest.signed('GET', '/api/v3/account')).json.balances, 'balances over the tunnelled WebSocket API');
      api.ws.close();
    });

    await step('a replica SIGKILLed and restarted resumes and converges', async () => {
      replicaA.kill();
      await replicaA.exitedPromise;
      for (let i = 0; i < 40; i++) await order(i * 4 + 2);  // straight to the primary
      replicaA = await startServer({ bin, name: 'replica-a', command: 'replica', extraArgs: replicaArgs, dataDir: replicaA.dataDir });
      servers.push(replicaA);
      for (const t of traders) t.viaReplica = new RestClient(replicaA.base, { apiKey: t.apiKey, secret: t.secret });
      for (let i = 0; i < 40; i++) await order(i);
      check(errors.length === 0, `orders failed: ${errors.slice(0, 3).join('; ')}`);
      await converge(primary, [replicaA, replicaB], 'after the restart');
      await sameRest(primary, replicaA, 'replica A restarted', { booksOnly: true });
      await sameRest(primary, replicaB, 'replica B', { booksOnly: true });
      eq((await health(replicaB)).replica.duplicates, 0, 'replica B records received twice');
    });

    await step('NATS down for 10 s: trading goes on, the lag shows, then everything catches up', async () => {
      await nats.stop();
      const t0 = Date.now();
      for (let i = 0; i < 30; i++) await order(i * 4 + 2);  // straight to the primary
      check(errors.length === 0, `orders failed with NATS down: ${errors.slice(0, 3).join('; ')}`);
      const lag = (await health(primary)).bus.lagEvents;
      check(lag > 0, `the primary's bus lag with NATS down: ${lag}`);
      await sleep(Math.max(0, 10000 - (Date.now() - t0)));
      nats = await startNats(natsPort, path.join(tmp, 'nats'));
      await waitFor(async () => (await health(primary)).bus.lagEvents === 0, { timeout: 20000, what: 'the publisher caught up' });
      await converge(primary, [replicaA, replicaB], 'after NATS came back', 30000);
      await sameRest(primary, replicaA, 'replica A after the outage', { booksOnly: true });
      await sameRest(primary, replicaB, 'replica B after the outage', { booksOnly: true });
    }, 90000);
  } catch (e) {
    // What each server said last, for a failure's diagnosis (a process that
    // ended on its own shows its exit here).
    for (const s of servers) {
      const how = s.exited ? `exited (code ${s.exited.code}, signal ${s.exited.signal})` : 'running';
      log(`--- ${s.args[0]} ${s.base ?? ''} ${how}; its last lines:\n${s.outputTail(25)}`);
    }
    throw e;
  } finally {
    for (const s of servers.reverse()) {
      if (!s.exited) {
        try { await s.stop(); } catch (e) { log(`stop: ${e.message.split('\n')[0]}`); s.kill(); }
      }
    }
    nats.kill();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}, { timeoutMs: 240000 });

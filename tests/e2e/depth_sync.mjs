// A local order book kept from the diff depth stream, by the Binance rules,
// while thousands of random orders (resting, crossing, IOC, market, cancels)
// from two accounts hit the server; at the end the rebuilt book must equal
// GET /api/v3/depth exactly, and lastUpdateId must equal the last applied u.
//
// The Binance procedure (per consumer):
//   1. open /ws, SUBSCRIBE <sym>@depth@100ms (and @depth@0ms on a second
//      connection), wait for {"result":null,"id":N}; buffer every event;
//   2. GET /api/v3/depth?symbol=BTCUSDT&limit=5000 -> lastUpdateId L;
//   3. drop buffered events with u <= L; the first applied event must have
//      U <= L+1 <= u; every later one U == previous u + 1;
//   4. apply levels; a quantity of 0 removes the level.
//
// Usage: node depth_sync.mjs <matchbook binary>
// Env: E2E_DEPTH_ORDERS (default 3000), E2E_SEED (repeat a random run).

import {
  Admin, binaryFromArgs, canon, check, decimal, eq, fail, json, log, makeTrader, rng, runMain, seedFromEnv,
  sleep, step, units, waitFor, withServer, WsClient,
} from './lib.mjs';

const bin = binaryFromArgs();
const ORDERS = Number(process.env.E2E_DEPTH_ORDERS || 3000);
const CONCURRENCY = 12;
const MID = 3000000n;  // 30000.00 in ticks of 0.01
const STREAMS = ['btcusdt@depth@100ms', 'btcusdt@depth@0ms'];

function tickPrice(ticks) {
  return `${ticks / 100n}.${(ticks % 100n).toString().padStart(2, '0')}`;
}

// One Binance-rules depth consumer.
class DepthConsumer {
  constructor(name) {
    this.name = name;
    this.bids = new Map();  // canonical price -> qty units (BigInt)
    this.asks = new Map();
    this.buffer = [];
    this.synced = false;
    this.snapshotId = null;
    this.lastU = null;  // u of the last applied event
    this.applied = 0;
    this.dropped = 0;
    this.received = 0;
    this.lastEventAt = 0;
    this.error = null;
  }

  onMessage(m) {
    if (!m || m.e !== 'depthUpdate') return;  // subscription answers
    this.received++;
    this.lastEventAt = Date.now();
    if (this.error) return;
    try {
      if (m.s !== 'BTCUSDT') fail(`event for ${m.s} on a BTCUSDT stream`);
      if (!Number.isInteger(m.U) || !Number.isInteger(m.u) || m.U > m.u) fail(`bad U/u in ${json(m)}`);
      if (!Number.isInteger(m.E)) fail(`event time E missing in ${json(m)}`);
      if (this.synced) this.apply(m);
      else this.buffer.push(m);
    } catch (e) {
      this.error = e;
    }
  }

  loadSnapshot(snap) {
    this.snapshotId = snap.lastUpdateId;
    check(Number.isInteger(this.snapshotId), `${this.name}: snapshot lastUpdateId not an integer: ${json(snap.lastUpdateId)}`);
    for (const [p, q] of snap.bids) this.bids.set(canon(p), units(q));
    for (const [p, q] of snap.asks) this.asks.set(canon(p), units(q));
    this.synced = true;
    const buffered = this.buffer;
    this.buffer = [];
    for (const m of buffered) this.apply(m);
    if (this.error) throw this.error;
  }

  apply(m) {
    if (this.lastU === null) {
      if (m.u <= this.snapshotId) {
        this.dropped++;
        return;
      }
      const L = this.snapshotId;
      if (!(m.U <= L + 1 && L + 1 <= m.u)) {
        fail(`${this.name}: first event after the snapshot (lastUpdateId ${L}) must have U <= ${L + 1} <= u, got U=${m.U} u=${m.u}`);
      }
    } else if (m.U !== this.lastU + 1) {
      fail(`${this.name}: gap: event U=${m.U} u=${m.u} after u=${this.lastU} (expected U=${this.lastU + 1})`);
    }
    for (const [side, levels] of [[this.bids, m.b], [this.asks, m.a]]) {
      for (const [p, q] of levels) {
        const qty = units(q);
        if (qty === 0n) side.delete(canon(p));
        else side.set(canon(p), qty);
      }
    }
    this.lastU = m.u;
    this.applied++;
  }

  view() {
    const sorted = (map, desc) => [...map.entries()]
      .sort((a, b) => {
        const d = units(a[0]) - units(b[0]);
        return Number(desc ? -d : d);
      })
      .map(([p, q]) => [p, decimal(q)]);
    return { bids: sorted(this.bids, true), asks: sorted(this.asks, false) };
  }
}

function snapView(snap) {
  return {
    bids: snap.bids.map(([p, q]) => [canon(p), canon(q)]),
    asks: snap.asks.map(([p, q]) => [canon(p), canon(q)]),
  };
}

async function main(srv) {
  const admin = new Admin(srv);
  const seed = seedFromEnv();
  const rand = rng(seed);
  log(`  seed ${seed} (E2E_SEED=${seed} repeats this run), ${ORDERS} orders, concurrency ${CONCURRENCY}`);
  const traders = [];
  await step('two funded traders', async () => {
    traders.push(await makeTrader(admin, srv, 't1', { BTC: '10000', USDT: '100000000' }));
    traders.push(await makeTrader(admin, srv, 't2', { BTC: '10000', USDT: '100000000' }));
  });

  const consumers = [];
  const sockets = [];
  await step('subscribe the depth streams (buffering)', async () => {
    for (const stream of STREAMS) {
      const c = new DepthConsumer(stream);
      const ws = await WsClient.connect(`${srv.wsBase}/ws`, { keep: false });
      ws.onMessage((m) => c.onMessage(m));
      await ws.subscribe([stream]);
      consumers.push(c);
      sockets.push(ws);
    }
  });

  // The random order flow.
  const stats = { sent: 0, newOrders: 0, cancels: 0, cancelMissed: 0, market: 0, crossing: 0, errors: [] };
  const open = [];  // [{ trader, orderId }]
  let next = 0;
  async function one(i) {
    const r = rand();
    if (r < 0.15 && open.length > 0) {
      const idx = Math.floor(rand() * open.length);
      const [o] = open.splice(idx, 1);
      const res = await o.trader.rest.signed('DELETE', '/api/v3/order', { symbol: 'BTCUSDT', orderId: o.orderId });
      stats.cancels++;
      if (res.status === 200) return;
      if (res.json && (res.json.code === -2011 || res.json.code === -2013)) {
        stats.cancelMissed++;  // already filled or expired: fine
        return;
      }
      stats.errors.push(`DELETE /api/v3/order orderId=${o.orderId}: HTTP ${res.status} ${res.text.slice(0, 300)}`);
      return;
    }
    const trader = traders[i % 2];
    const buy = rand() < 0.5;
    const qty = `0.${String(rand.int(1, 50)).padStart(3, '0')}`;  // 0.001 .. 0.050
    const params = { symbol: 'BTCUSDT', side: buy ? 'BUY' : 'SELL', newOrderRespType: 'ACK' };
    let resting = false;
    const k = rand();
    if (k < 0.08) {
      Object.assign(params, { type: 'MARKET', quantity: qty });
      stats.market++;
    } else if (k < 0.25) {
      // Crossing: through the touch by up to 0.50.
      const ticks = MID + (buy ? 1n : -1n) * BigInt(rand.int(0, 50));
      Object.assign(params, { type: 'LIMIT', timeInForce: rand() < 0.5 ? 'IOC' : 'GTC', quantity: qty, price: tickPrice(ticks) });
      resting = params.timeInForce === 'GTC';
      stats.crossing++;
    } else {
      // Passive, up to 3.00 away from the mid: a few hundred levels a side.
      const ticks = MID + (buy ? -1n : 1n) * BigInt(rand.int(1, 300));
      Object.assign(params, { type: 'LIMIT', timeInForce: 'GTC', quantity: qty, price: tickPrice(ticks) });
      resting = true;
    }
    const res = await trader.rest.signed('POST', '/api/v3/order', params);
    stats.newOrders++;
    if (res.status !== 200 || !res.json || res.json.orderId === undefined) {
      stats.errors.push(`POST /api/v3/order ${json(params)}: HTTP ${res.status} ${res.text.slice(0, 300)}`);
      return;
    }
    if (resting) open.push({ trader, orderId: res.json.orderId });
  }
  async function worker() {
    for (;;) {
      const i = next++;
      if (i >= ORDERS) return;
      await one(i);
      stats.sent++;
      if (stats.errors.length > 20) return;
    }
  }

  const t0 = Date.now();
  const flow = Promise.all(Array.from({ length: CONCURRENCY }, worker));

  await step('snapshots mid-flow, then apply the buffered and live diffs', async () => {
    // Consumer i takes its snapshot after (i+1) * 10% of the orders went out.
    for (let i = 0; i < consumers.length; i++) {
      const c = consumers[i];
      await waitFor(() => stats.sent >= Math.floor(ORDERS * (i + 1) / 10) || stats.errors.length > 0, { timeout: 30000, what: `${Math.floor(ORDERS * (i + 1) / 10)} orders sent`, describe: () => json(stats) });
      const res = await traders[0].rest.get('/api/v3/depth', { symbol: 'BTCUSDT', limit: 5000 });
      check(res.status === 200 && res.json, `GET /api/v3/depth?symbol=BTCUSDT&limit=5000: HTTP ${res.status} ${res.text.slice(0, 300)}`);
      c.loadSnapshot(res.json);
      log(`    ${c.name}: snapshot lastUpdateId ${res.json.lastUpdateId} (${res.json.bids.length} bids, ${res.json.asks.length} asks), ${c.dropped} buffered events dropped, ${c.applied} applied`);
    }
  }, 60000);

  await step(`order flow: ${ORDERS} orders`, async () => {
    await flow;
    const secs = (Date.now() - t0) / 1000;
    log(`    ${stats.sent} requests in ${secs.toFixed(1)} s (${Math.round(stats.sent / secs)}/s): ${stats.newOrders} orders (${stats.crossing} crossing, ${stats.market} market), ${stats.cancels} cancels (${stats.cancelMissed} already gone)`);
    if (stats.errors.length) fail(`${stats.errors.length} unexpected answers, first ones:\n    ${stats.errors.slice(0, 5).join('\n    ')}`);
    for (const c of consumers) if (c.error) throw c.error;
  }, 90000);

  await step('quiet: rebuilt books equal GET /api/v3/depth exactly', async () => {
    // Quiet = no depth event for 700 ms on any consumer.
    await waitFor(() => consumers.every((c) => Date.now() - c.lastEventAt > 700), { timeout: 10000, what: 'the depth streams to go quiet' });
    const res = await traders[0].rest.get('/api/v3/depth', { symbol: 'BTCUSDT', limit: 5000 });
    check(res.status === 200 && res.json, `final GET /api/v3/depth: HTTP ${res.status} ${res.text.slice(0, 300)}`);
    const snap = res.json;
    check(snap.bids.length < 5000 && snap.asks.length < 5000, 'the book has 5000 levels on a side: the snapshot may be truncated; lower E2E_DEPTH_ORDERS');
    check(snap.bids.length > 10 && snap.asks.length > 10, `the final book is too thin to mean anything: ${snap.bids.length} bids, ${snap.asks.length} asks`);
    const want = snapView(snap);
    // Sorted and not crossed.
    for (let i = 1; i < want.bids.length; i++) check(units(want.bids[i - 1][0]) > units(want.bids[i][0]), `REST bids not strictly descending at ${i}: ${json(want.bids.slice(i - 1, i + 1))}`);
    for (let i = 1; i < want.asks.length; i++) check(units(want.asks[i - 1][0]) < units(want.asks[i][0]), `REST asks not strictly ascending at ${i}: ${json(want.asks.slice(i - 1, i + 1))}`);
    check(units(want.bids[0][0]) < units(want.asks[0][0]), `REST book crossed: best bid ${want.bids[0][0]} >= best ask ${want.asks[0][0]}`);
    for (const c of consumers) {
      if (c.error) throw c.error;
      eq(c.lastU, snap.lastUpdateId, `${c.name}: last applied u vs final lastUpdateId`);
      const got = c.view();
      if (json(got) !== json(want)) {
        const diff = [];
        for (const side of ['bids', 'asks']) {
          const a = new Map(got[side]);
          const b = new Map(want[side]);
          for (const [p, q] of b) if (a.get(p) !== q) diff.push(`${side} ${p}: rebuilt ${a.get(p) ?? '(none)'}, REST ${q}`);
          for (const [p, q] of a) if (!b.has(p)) diff.push(`${side} ${p}: rebuilt ${q}, REST (none)`);
        }
        fail(`${c.name}: rebuilt book differs from GET /api/v3/depth (lastUpdateId ${snap.lastUpdateId}) at ${diff.length} levels:\n    ${diff.slice(0, 10).join('\n    ')}`);
      }
      log(`    ${c.name}: ${c.received} events, ${c.applied} applied, ${c.dropped} dropped; ${want.bids.length} bids / ${want.asks.length} asks match; lastUpdateId ${snap.lastUpdateId}`);
    }
    check(consumers[1].applied >= consumers[0].applied, `@depth@0ms applied fewer events (${consumers[1].applied}) than @depth@100ms (${consumers[0].applied})`);
    check(consumers[0].applied >= 10, `@depth@100ms applied only ${consumers[0].applied} events during a ${ORDERS}-order flow`);
    const trades = await traders[0].rest.get('/api/v3/trades', { symbol: 'BTCUSDT', limit: 5 });
    check(trades.status === 200 && Array.isArray(trades.json) && trades.json.length > 0, `the flow made no trades? GET /api/v3/trades: ${trades.text.slice(0, 200)}`);
  });

  for (const ws of sockets) ws.close();
  await sleep(50);
}

runMain('depth_sync', () => withServer({ bin }, main), { timeoutMs: 110000 });

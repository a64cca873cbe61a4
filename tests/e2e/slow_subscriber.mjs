// A WebSocket subscriber that stops reading must be cut off by the server
// (bounded send queue, close code 1008) without slowing anyone else: two
// normal readers keep receiving every trade, and the latency of order entry
// (POST /api/v3/order, newOrderRespType=ACK) does not move.
//
// Server flags: --ws-send-queue-messages 256 --ws-send-queue-bytes 1048576
// --ws-slow-close-grace-ms 6000 (S2 must resume reading within the grace
// period to see the close frame; 6 s rather than the default 2 s keeps that
// a check of behaviour even when a loaded machine schedules the client late).
//
// What a peer sees of "closed with 1008" depends on whether it reads: the
// close frame can only travel once the data already in the TCP buffers
// (about 4 MB on loopback) has been read. So two stalled clients:
//   S1 never reads again until the server has torn its connection down; it
//      checks the server gives up on it (its end of the TCP connection leaves
//      ESTABLISHED) within a bound of traffic, and that it then got no more
//      than the TCP buffers plus the queue bound;
//   S2 stops reading until its server queue overflowed (seen from outside:
//      the TCP buffers stopped filling and the readers got more than the 256
//      queued messages since), then reads again: it must get the close frame
//      1008 "slow consumer: send queue full" after the data in flight.
//
// Phases:
//   seed   alice rests a large ask (every taker IOC fills against it, one
//          trade each) and a 20-level book on both sides
//   before readers R1, R2 subscribed to the busy BTCUSDT streams; a paced
//          taker flow; latencies of every POST recorded
//   stall  S1 and S2 subscribe to the same streams, read the answer, pause
//          their sockets (ws._socket.pause()); the flow goes on; latencies
//          recorded until both are cut off
//   check  both readers saw every trade (trade ids), their depth@0ms diffs
//          have no gap, and they kept receiving trades while the stalled
//          clients were still connected and not reading: at least
//          MIN_TRADES_WHILE_STALLED new trades between S1's pause and the
//          server giving up on it, and orders kept being answered meanwhile
//          (counts, not times: a publisher blocked by a stalled reader
//          delivers nothing to anyone until it is cut off). Order latency
//          before and during the stall is printed, not bounded: on a shared
//          VM a timed bound either fails on noise or is too wide to matter.
//
// Usage: node slow_subscriber.mjs <matchbook binary>
// Env: E2E_SLOW_RATE (requests/s of the flow, default 600).

import fs from 'node:fs';
import {
  Admin, binaryFromArgs, check, eq, fail, json, log, makeTrader, percentile, runMain, sleep, step,
  waitFor, withServer, WsClient,
} from './lib.mjs';

const bin = binaryFromArgs();
const RATE = Number(process.env.E2E_SLOW_RATE || 600);
const CONCURRENCY = 8;
const BEFORE_MS = 3000;
const STALL_MAX_MS = 45000;
const QUEUE_MESSAGES = 256;
const QUEUE_BYTES = 1048576;
const CLOSE_GRACE_MS = 6000;
// Loopback TCP here buffers about 4 MB toward a reader that stopped (server
// send buffer + client receive buffer); the server queue adds at most 1 MB.
// A stalled client must be cut off before the readers got this much since
// it stopped: twice what the buffers and the queue can hold.
const CUTOFF_BOUND_BYTES = 12 * 1024 * 1024;
// ... and it can never have received more than that.
const STALLED_MAX_BYTES = 12 * 1024 * 1024;
// Trades the normal readers must receive while S1 is stalled and still
// connected (the flow makes hundreds a second; a blocked publisher none).
const MIN_TRADES_WHILE_STALLED = 100;
const STREAMS = [
  'btcusdt@trade', 'btcusdt@aggTrade', 'btcusdt@depth@0ms', 'btcusdt@depth@100ms', 'btcusdt@depth20@100ms',
  'btcusdt@bookTicker', 'btcusdt@ticker', 'btcusdt@miniTicker', 'btcusdt@kline_1m',
];

// Both ends of a loopback TCP connection from /proc/net/tcp{,6} (Linux):
// { server: { state, txQueue }, client: { state, rxQueue } }; state '01' is
// ESTABLISHED; an end that is gone is null.
function tcpPair(serverPort, clientPort) {
  const hex = (p) => p.toString(16).toUpperCase().padStart(4, '0');
  const out = { server: null, client: null };
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 5) continue;
      const [tx, rx] = f[4].split(':').map((h) => parseInt(h, 16));
      if (f[1].endsWith(`:${hex(serverPort)}`) && f[2].endsWith(`:${hex(clientPort)}`)) out.server = { state: f[3], txQueue: tx };
      if (f[1].endsWith(`:${hex(clientPort)}`) && f[2].endsWith(`:${hex(serverPort)}`)) out.client = { state: f[3], rxQueue: rx };
    }
  }
  return out;
}

// A reader: counts trades by id and checks the depth@0ms diffs are contiguous.
function makeReader(name, ws) {
  const r = { name, ws, trades: new Set(), dupTrades: 0, lastU: null, depthEvents: 0, gaps: [], lastAt: 0 };
  ws.onMessage((m) => {
    if (!m || !m.stream || !m.data) return;
    r.lastAt = Date.now();
    if (m.stream === 'btcusdt@trade') {
      if (r.trades.has(m.data.t)) r.dupTrades++;
      r.trades.add(m.data.t);
    } else if (m.stream === 'btcusdt@depth@0ms') {
      r.depthEvents++;
      if (r.lastU !== null && m.data.U !== r.lastU + 1) r.gaps.push(`U=${m.data.U} after u=${r.lastU}`);
      r.lastU = m.data.u;
    }
  });
  return r;
}

async function main(srv) {
  const admin = new Admin(srv);
  const serverPort = Number(new URL(srv.base).port);
  let alice;
  const takers = [];
  await step('traders and a seeded book', async () => {
    alice = await makeTrader(admin, srv, 'alice', { BTC: '1000', USDT: '1000000' });
    for (const name of ['bob', 'carol', 'dave']) takers.push(await makeTrader(admin, srv, name, { USDT: '10000000' }));
    const post = async (t, params) => {
      const res = await t.rest.signed('POST', '/api/v3/order', { symbol: 'BTCUSDT', newOrderRespType: 'ACK', ...params });
      if (res.status !== 200) fail(`seed order ${json(params)}: HTTP ${res.status} ${res.text.slice(0, 300)}`);
    };
    await post(alice, { side: 'SELL', type: 'LIMIT', timeInForce: 'GTC', quantity: '100', price: '30000' });
    for (let i = 1; i <= 20; i++) {
      await post(alice, { side: 'SELL', type: 'LIMIT', timeInForce: 'GTC', quantity: '0.01', price: String(30000 + 10 * i) });
      await post(takers[0], { side: 'BUY', type: 'LIMIT', timeInForce: 'GTC', quantity: '0.01', price: String(30000 - 10 * i) });
    }
  });

  const readers = [];
  await step('two normal readers subscribe', async () => {
    for (const name of ['R1', 'R2']) {
      const ws = await WsClient.connect(`${srv.wsBase}/stream?streams=${STREAMS[0]}`, { keep: false });
      const r = makeReader(name, ws);
      await ws.subscribe(STREAMS.slice(1));
      readers.push(r);
    }
  });

  // The paced taker flow: BUY IOC 0.001 @ 30000, one trade each against alice's ask.
  const flow = { phase: 'warmup', stop: false, ok: 0, errors: [], lat: { warmup: [], before: [], during: [], after: [] } };
  let slot = performance.now();
  const interval = 1000 / RATE;
  async function worker(w) {
    let n = 0;
    while (!flow.stop) {
      slot += interval;
      const wait = slot - performance.now();
      if (wait > 0) await sleep(wait);
      else if (wait < -1000) slot = performance.now();  // fell behind: do not burst
      const t = takers[(w + n++) % takers.length];
      const phase = flow.phase;
      const res = await t.rest.signed('POST', '/api/v3/order', {
        symbol: 'BTCUSDT', side: 'BUY', type: 'LIMIT', timeInForce: 'IOC', quantity: '0.001', price: '30000', newOrderRespType: 'ACK',
      });
      if (res.status !== 200 || !res.json || res.json.orderId === undefined) {
        flow.errors.push(`POST /api/v3/order: HTTP ${res.status} ${res.text.slice(0, 300)}`);
        if (flow.errors.length > 5) flow.stop = true;
        continue;
      }
      flow.ok++;
      if (phase === flow.phase) flow.lat[phase].push(res.ms);
    }
  }
  const workers = Array.from({ length: CONCURRENCY }, (_, w) => worker(w));
  const readerBytes = () => Math.min(...readers.map((r) => r.ws.bytes));
  const readerMessages = () => Math.min(...readers.map((r) => r.ws.received));
  const readerTrades = () => Math.min(...readers.map((r) => r.trades.size));

  const stalled = [];
  try {
    await step(`before: ${BEFORE_MS} ms of flow at ${RATE}/s`, async () => {
      await sleep(500);  // connections and JIT warm up: not measured
      flow.phase = 'before';
      const ok0 = flow.ok;
      await sleep(BEFORE_MS);
      if (flow.errors.length) fail(`order flow errors:\n    ${flow.errors.join('\n    ')}`);
      log(`    ${Math.round((flow.ok - ok0) / (BEFORE_MS / 1000))} orders/s, readers at ${(readerBytes() / (BEFORE_MS + 500)).toFixed(0)} KB/s`);
      check(flow.lat.before.length >= 100, `only ${flow.lat.before.length} orders in ${BEFORE_MS} ms`);
      check(readers.every((r) => r.trades.size > 0), 'the readers got no trade');
    });

    await step('stall: S1 (never reads) and S2 (reads again after its overflow) are cut off', async () => {
      for (const name of ['S1', 'S2']) {
        const ws = await WsClient.connect(`${srv.wsBase}/stream?streams=${STREAMS[0]}`, { keep: false });
        await ws.subscribe(STREAMS.slice(1));
        const s = {
          name, ws, clientPort: ws.ws._socket.localPort, bytesAtPause: 0, pausedAt: 0, readerBytesAtPause: 0,
          maxBuffered: 0, readerMsgsAtMax: 0, resumedAt: null, retries: 0, serverGaveUpAfter: null, readerBytesAtGiveUp: null, lastE: 0,
          readerTradesAtPause: 0, readerTradesAtGiveUp: null, ordersAtPause: 0, ordersAtGiveUp: null,
        };
        if (name === 'S2') {
          ws.countOnly = true;  // S2 must drain its backlog fast once it reads again
        } else {
          ws.onMessage((m) => {
            if (m && m.data && Number.isInteger(m.data.E)) s.lastE = Math.max(s.lastE, m.data.E);
          });
        }
        s.bytesAtPause = ws.bytes;
        ws.ws._socket.pause();
        s.pausedAt = Date.now();
        s.readerBytesAtPause = readerBytes();
        s.readerTradesAtPause = readerTrades();
        s.ordersAtPause = flow.ok;
        s.readerMsgsAtMax = readerMessages();
        stalled.push(s);
      }
      flow.phase = 'during';
      const [s1, s2] = stalled;
      const startedAt = Date.now();
      await waitFor(() => {
        if (flow.errors.length) fail(`order flow errors:\n    ${flow.errors.join('\n    ')}`);
        for (const s of stalled) {
          const tcp = tcpPair(serverPort, s.clientPort);
          if (s.serverGaveUpAfter === null && (!tcp.server || tcp.server.state !== '01')) {
            s.serverGaveUpAfter = Date.now() - s.pausedAt;
            s.readerBytesAtGiveUp = readerBytes() - s.readerBytesAtPause;
            s.readerTradesAtGiveUp = readerTrades();
            s.ordersAtGiveUp = flow.ok;
          }
          if (s === s2 && s.resumedAt === null && tcp.server && tcp.client) {
            // The TCP buffers toward S2 stopped filling, and the readers got
            // more messages than S2's server queue may hold since: it overflowed.
            const buffered = tcp.server.txQueue + tcp.client.rxQueue;
            if (buffered > s.maxBuffered + 4096) {
              s.maxBuffered = buffered;
              s.readerMsgsAtMax = readerMessages();
            } else if (s.maxBuffered > QUEUE_BYTES && readerMessages() - s.readerMsgsAtMax > QUEUE_MESSAGES + 64) {
              s.resumedAt = Date.now();
              s.resumedPerf = performance.now();
              s.ws.ws._socket.resume();
            }
          } else if (s === s2 && s.resumedAt !== null && s.ws.closed === null && Date.now() - s.resumedAt > 2000 && s.retries < 5) {
            // Resumed before its queue overflowed (it caught up and is a normal
            // reader again): stop reading once more and watch again.
            s.ws.ws._socket.pause();
            s.retries++;
            s.resumedAt = null;
            s.maxBuffered = 0;
            s.readerMsgsAtMax = readerMessages();
            s.bytesAtPause = s.ws.bytes;
          }
        }
        for (const s of stalled) {
          if (s.serverGaveUpAfter === null && readerBytes() - s.readerBytesAtPause > CUTOFF_BOUND_BYTES) {
            fail(`${s.name} was not cut off: the readers got ${readerBytes() - s.readerBytesAtPause} bytes since it stopped reading (bound ${CUTOFF_BOUND_BYTES}) and the server still holds its connection open`);
          }
        }
        return s1.serverGaveUpAfter !== null && s2.ws.closed !== null;
      }, {
        timeout: STALL_MAX_MS,
        interval: 10,
        what: 'both stalled clients to be cut off (E2E_SLOW_RATE may be too low to overflow them)',
        describe: () => `readers got ${readerBytes() - s1.readerBytesAtPause} bytes since the pause; S1 server end ${s1.serverGaveUpAfter === null ? 'open' : 'closed'}; S2 ${s2.resumedAt === null ? `paused (buffered max ${s2.maxBuffered})` : 'reading'}, closed ${json(s2.ws.closed)}`,
      });
      flow.phase = 'after';
      log(`    stall lasted ${((Date.now() - startedAt) / 1000).toFixed(1)} s; readers got ${((readerBytes() - s1.readerBytesAtPause) / 1048576).toFixed(1)} MB meanwhile`);
      for (const s of stalled) {
        log(`    ${s.name}: server end of its TCP connection left ESTABLISHED ${s.serverGaveUpAfter === null ? '(not yet)' : `${s.serverGaveUpAfter} ms after the pause, when the readers had got ${(s.readerBytesAtGiveUp / 1048576).toFixed(2)} MB`}`);
      }
    }, STALL_MAX_MS + 5000);

    await step('S2 got close 1008 "slow consumer" right after the data in flight', async () => {
      const s2 = stalled[1];
      const c = await s2.ws.waitClose(5000);
      const got = s2.ws.bytes - s2.bytesAtPause;
      log(`    S2: resumed ${s2.resumedAt - s2.pausedAt} ms after the pause${s2.retries ? ` (${s2.retries} early resume(s) retried)` : ''} (TCP buffers held ${(s2.maxBuffered / 1048576).toFixed(2)} MB), closed ${c.code} "${c.reason}" ${Math.round(c.at - s2.resumedPerf)} ms later, after ${(got / 1048576).toFixed(2)} MB`);
      eq(c.code, 1008, 'S2 close code');
      eq(c.reason, 'slow consumer: send queue full', 'S2 close reason');
      check(got <= STALLED_MAX_BYTES, `S2 got ${got} bytes after it stopped reading (at most ${STALLED_MAX_BYTES} expected)`);
    });

    await step('S1 reads again: the connection is gone after a bounded amount of data', async () => {
      const s1 = stalled[0];
      s1.ws.ws._socket.resume();
      const c = await s1.ws.waitClose(10000).catch(() => null);
      const got = s1.ws.bytes - s1.bytesAtPause;
      if (!c) fail(`S1 still open 10 s after resuming, ${got} bytes since the pause: the server never cut it off`);
      log(`    S1: closed ${c.code} "${c.reason}" after ${(got / 1048576).toFixed(2)} MB since the pause; last event stamped ${s1.lastE ? s1.lastE - s1.pausedAt : '-'} ms after the pause${c.code === 1006 ? ' (the close frame could not pass the unread data: torn down after the grace period)' : ''}`);
      check(c.code === 1008 || c.code === 1006, `S1 close code: expected 1008 or 1006 (torn down), got ${c.code} "${c.reason}"`);
      check(got <= STALLED_MAX_BYTES, `S1 got ${got} bytes after it stopped reading (at most ${STALLED_MAX_BYTES} expected)`);
      const readerGot = readerBytes() - s1.readerBytesAtPause;
      check(got < readerGot, `S1 got as much as the readers (${got} >= ${readerGot} bytes): it was not cut off`);
      check(readers.every((r) => r.ws.closed === null), `a normal reader was closed: ${json(readers.map((r) => r.ws.closed))}`);
    });

    await step('readers got every trade; order latency unchanged', async () => {
      flow.stop = true;
      await Promise.all(workers);
      if (flow.errors.length) fail(`order flow errors:\n    ${flow.errors.join('\n    ')}`);
      const made = flow.ok;
      await waitFor(() => readers.every((r) => r.trades.size >= made), {
        timeout: 10000,
        what: `both readers to see all ${made} trades`,
        describe: () => readers.map((r) => `${r.name}: ${r.trades.size}`).join(', '),
      });
      await sleep(300);
      for (const r of readers) {
        eq(r.trades.size, made, `${r.name}: distinct trades seen vs trades made`);
        eq(r.dupTrades, 0, `${r.name}: duplicate trade messages`);
        if (r.gaps.length) fail(`${r.name}: depth@0ms gaps: ${r.gaps.slice(0, 5).join(', ')}`);
        check(r.depthEvents > 0, `${r.name}: no depth@0ms event`);
        check(r.ws.closed === null, `${r.name} was closed: ${json(r.ws.closed)}`);
      }
      log(`    ${made} trades made, each seen once by both readers`);
      // The server's own count, when the ticker has it.
      const tk = await alice.rest.get('/api/v3/ticker/24hr', { symbol: 'BTCUSDT' });
      check(tk.status === 200 && tk.json, `GET /api/v3/ticker/24hr: HTTP ${tk.status} ${tk.text.slice(0, 200)}`);
      if (tk.json.count !== undefined) eq(tk.json.count, made, 'ticker/24hr count vs trades made');

      const b = flow.lat.before;
      const d = flow.lat.during;
      const p = (xs, q) => percentile(xs, q).toFixed(2);
      log(`    POST /api/v3/order (ACK) latency: before n=${b.length} p50 ${p(b, 50)} ms p99 ${p(b, 99)} ms; during the stall n=${d.length} p50 ${p(d, 50)} ms p99 ${p(d, 99)} ms`);
      check(d.length >= 100, `only ${d.length} orders during the stall`);
      // Nothing waited for the stalled clients: while S1 sat unread and still
      // connected, the readers kept getting trades and orders kept being answered.
      const s1 = stalled[0];
      const tradesWhileStalled = s1.readerTradesAtGiveUp - s1.readerTradesAtPause;
      const ordersWhileStalled = s1.ordersAtGiveUp - s1.ordersAtPause;
      log(`    while S1 was stalled and connected: readers got ${tradesWhileStalled} new trades, ${ordersWhileStalled} orders answered`);
      check(tradesWhileStalled >= MIN_TRADES_WHILE_STALLED,
        `the readers got only ${tradesWhileStalled} trades while S1 was stalled (at least ${MIN_TRADES_WHILE_STALLED} expected): the publisher waited for it`);
      check(ordersWhileStalled >= MIN_TRADES_WHILE_STALLED,
        `only ${ordersWhileStalled} orders answered while S1 was stalled (at least ${MIN_TRADES_WHILE_STALLED} expected)`);
    });
  } finally {
    flow.stop = true;
    await Promise.allSettled(workers);
    for (const r of readers) r.ws.close();
    for (const s of stalled) s.ws.terminate();
    await sleep(50);
  }
}

runMain('slow_subscriber', () => withServer({ bin, extraArgs: ['--ws-send-queue-messages', String(QUEUE_MESSAGES), '--ws-send-queue-bytes', String(QUEUE_BYTES), '--ws-slow-close-grace-ms', String(CLOSE_GRACE_MS)] }, main), { timeoutMs: 110000 });

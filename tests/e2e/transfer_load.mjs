// Transfers between two venues under load (tests/e2e/venues.mjs: beta in its
// own network namespace). Two forms:
//
//   soak:  node transfer_load.mjs <matchbook> soak [--transfers N] [--kills K] [--outage S]
//          N transfers in both directions while both venues trade; K SIGKILLs
//          of either venue at random moments; with --outage, beta down for S
//          seconds at the middle while alpha accepts transfers to it (each
//          must wait as processing, then complete once beta is back). At the end every transfer is
//          completed on its source and credited once on its destination, or
//          refunded on its source and absent on its destination; each asset
//          over both venues equals what was deposited from outside; `matchbook
//          verify` accepts both data directories.
//   bench: node transfer_load.mjs <matchbook> bench [--dispatch pipelined|sequential]
//          [--rate R] [--duration S]
//          alpha -> beta at R transfers/s offered (0: as fast as the client
//          can); prints the completed rate and the completion latency (hold →
//          destination credit durable → completion durable) from alpha's own
//          histogram, p50/p99/p99.9/max, and the CPU time per transfer of each
//          venue from /proc.
//
// The suite runs `soak --transfers 300 --kills 3` (tests/e2e/run.sh); the
// full forms are in docs/benchmarks.md ("Transfers between venues").
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';

import {
  Admin, binaryFromArgs, check, encodeParams, eq, hmacHex, httpRequest, log, rng, runMain,
  seedFromEnv, sleep, units, waitFor,
} from './lib.mjs';
import { makeUser, startVenues } from './venues.mjs';

const bin = binaryFromArgs();
const mode = process.argv[3] || 'soak';
const arg = (name, def) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : def;
};
// No request-weight limits; /metrics answers the test on the veth address.
const unlimited = (t) => t.replace(/^weight_per_minute = \d+$/m, 'weight_per_minute = 0')
  .replace(/^ip_weight_per_minute = \d+$/m, 'ip_weight_per_minute = 0')
  .replace(/^(\[metrics\]\n)remote = false$/m, '$1remote = true');

// Signed calls over a keep-alive pool (the lib's RestClient opens a
// connection per call: too slow for thousands per second).
function client(srv, user, sockets = 16) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: sockets });
  const url = new URL(srv.base);
  return (method, path, params = {}) => new Promise((resolve) => {
    const qs = encodeParams({ ...params, timestamp: Date.now(), recvWindow: 60000 });
    const body = `${qs}&signature=${hmacHex(user.secret, qs)}`;
    const get = method === 'GET';
    const req = http.request({
      agent, host: url.hostname, port: url.port, method, path: get ? `${path}?${body}` : path,
      headers: { 'X-MBX-APIKEY': user.apiKey, ...(get ? {} : { 'Content-Type': 'application/x-www-form-urlencoded' }) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; });
      res.on('end', () => {
        let j;
        try { j = JSON.parse(text); } catch { j = undefined; }
        resolve({ status: res.statusCode, json: j, text });
      });
    });
    req.on('error', (e) => resolve({ status: 0, error: e.message }));
    if (!get) req.write(body);
    req.end();
  });
}

// Every row of a paged wallet history (newest first, offset/limit).
async function history(call, path) {
  const out = [];
  for (let offset = 0; ; offset += 1000) {
    const r = await call('GET', path, { offset, limit: 1000 });
    eq(r.status, 200, `${path}: ${r.text}`);
    out.push(...r.json);
    if (r.json.length < 1000) return out;
  }
}

// A Prometheus histogram family's cumulative buckets: [[le_seconds, count]].
async function buckets(srv, name) {
  const r = await httpRequest('GET', `${srv.base}/metrics`, { headers: { 'X-MB-ADMIN-TOKEN': srv.adminToken } });
  const out = [];
  for (const line of r.text.split('\n')) {
    const m = new RegExp(`^${name}_bucket\\{le="([^"]+)"\\} (\\d+)`).exec(line);
    if (m) out.push([m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2])]);
  }
  return out;
}
// One sample's value from a venue's /metrics (0 when absent).
async function counter(srv, series) {
  const r = await httpRequest('GET', `${srv.base}/metrics`);
  for (const line of r.text.split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return 0;
}
function quantile(before, after, q) {
  const d = after.map(([le, c], i) => [le, c - (before[i] ? before[i][1] : 0)]);
  const total = d.length ? d[d.length - 1][1] : 0;
  if (total === 0) return NaN;
  const want = q * total;
  let prevLe = 0, prevC = 0;
  for (const [le, c] of d) {
    if (c >= want) {
      if (le === Infinity) return prevLe;
      return prevLe + (le - prevLe) * ((want - prevC) / Math.max(1, c - prevC));
    }
    prevLe = le;
    prevC = c;
  }
  return prevLe;
}
function cpuSeconds(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const parts = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(parts[11]) + Number(parts[12])) / 100;  // utime + stime, in ticks of 10 ms
}
// The server's own pid: `ip netns exec` execs it in place, so it is the spawned one.
const pidOf = (srv) => srv.proc.pid;

async function soak() {
  const total = Number(arg('transfers', 300));
  const kills = Number(arg('kills', 3));
  const random = rng(seedFromEnv());
  const v = await startVenues(bin, {
    alpha: { transfers: '[transfers]\nretry_max_ms = 1000', edit: unlimited },
    beta: { transfers: '[transfers]\nretry_max_ms = 1000', edit: unlimited },
  });
  try {
    const alice = await makeUser(v.A, 'alice', { BTC: '1000', USDT: '1000000' });
    const bob = await makeUser(v.B, 'bob', { BTC: '1000', USDT: '1000000' });
    const addrTo = async (srv, user, coin) => (await client(srv, user)('GET', '/sapi/v1/capital/deposit/address', { coin })).json.address;
    const target = {
      alpha: { BTC: await addrTo(v.B, bob, 'BTC'), USDT: await addrTo(v.B, bob, 'USDT') },
      beta: { BTC: await addrTo(v.A, alice, 'BTC'), USDT: await addrTo(v.A, alice, 'USDT') },
    };
    let calls = { alpha: client(v.A, alice), beta: client(v.B, bob) };
    const accepted = { alpha: new Map(), beta: new Map() };  // withdrawOrderId -> amount text
    let sent = 0, killed = 0, stop = false;
    // Deliveries the destination had credited before (the source restarted
    // or lost the answer): summed over each server's life.
    let repeated = 0;
    // Trading on both venues meanwhile: orders placed and canceled.
    const trade = async (side) => {
      while (!stop) {
        const c = calls[side];
        const r = await c('POST', '/api/v3/order', { symbol: 'BTCUSDT', side: random() < 0.5 ? 'BUY' : 'SELL', type: 'LIMIT', timeInForce: 'GTC', quantity: '0.01', price: String(20000 + Math.floor(random() * 200)) });
        if (r.status === 200 && r.json.status === 'NEW') await c('DELETE', '/api/v3/order', { symbol: 'BTCUSDT', orderId: r.json.orderId });
        if (r.status !== 200) await sleep(50);
      }
    };
    const traders = [trade('alpha'), trade('beta')];
    // --outage S: beta is down for S seconds at the middle of the run, while
    // alpha keeps accepting transfers to it (they wait as pending).
    const outage = Number(arg('outage', 0));
    let outageDone = outage === 0;
    const killAt = new Set();
    while (killAt.size < kills) killAt.add(Math.floor(total * (0.1 + 0.8 * random())));
    while (sent < total) {
      if (!outageDone && sent >= total / 2) {
        outageDone = true;
        await v.B.stop({ keepDataDir: true });
        log(`soak: beta down for ${outage} s`);
        const t0 = Date.now();
        const ids = [];
        while (Date.now() - t0 < outage * 1000) {
          const coin = random() < 0.5 ? 'BTC' : 'USDT';
          const amount = coin === 'BTC' ? '0.001' : '1';
          const id = `outage-${ids.length}`;
          const r = await calls.alpha('POST', '/sapi/v1/capital/withdraw/apply', { coin, address: target.alpha[coin], amount, withdrawOrderId: id });
          eq(r.status, 200, `withdraw during the outage: ${r.text}`);
          accepted.alpha.set(id, { coin, amount, id: r.json.id });
          ids.push(r.json.id);
          await sleep(20);
        }
        const h = await calls.alpha('GET', '/sapi/v1/capital/withdraw/history', { limit: 1000 });
        const waiting = h.json.filter((x) => ids.includes(x.id) && x.status === 4).length;
        eq(waiting, ids.length, 'every transfer of the outage waits as processing (status 4)');
        const links = (await new Admin(v.A).request('GET', '/venues')).json.links.beta;
        check(links.backoffMs <= 5000 && links.errors > 0, `link during the outage: ${JSON.stringify(links)}`);
        await v.startB();
        calls = { alpha: client(v.A, alice), beta: client(v.B, bob) };
        const back = Date.now();
        await waitFor(async () => (await new Admin(v.A).request('GET', '/transfers?state=pending&limit=1')).json.length === 0, { timeout: 30000, interval: 50, what: 'the outage backlog delivered' });
        log(`soak: ${ids.length} transfers held during the outage, all completed ${((Date.now() - back) / 1000).toFixed(2)} s after beta was ready again`);
      }
      const side = random() < 0.5 ? 'alpha' : 'beta';
      const coin = random() < 0.5 ? 'BTC' : 'USDT';
      const amount = coin === 'BTC' ? `0.${String(1 + Math.floor(random() * 999)).padStart(3, '0')}` : String(1 + Math.floor(random() * 500));
      const id = `soak-${sent}`;
      // A refused call (the venue is restarting) is sent again with the same
      // withdrawOrderId: accepted once whatever happens.
      for (;;) {
        const r = await calls[side]('POST', '/sapi/v1/capital/withdraw/apply', { coin, address: target[side][coin], amount, withdrawOrderId: id });
        if (r.status === 200) {
          accepted[side].set(id, { coin, amount, id: r.json.id });
          break;
        }
        check(r.status === 0 || r.status === 503, `withdraw ${id}: ${r.status} ${r.text ?? r.error}`);
        await sleep(100);
      }
      sent++;
      if (killAt.has(sent)) {
        const victim = random() < 0.5 ? 'alpha' : 'beta';
        const srv = victim === 'alpha' ? v.A : v.B;
        repeated += await counter(srv, 'matchbook_venue_deposits_total{outcome="repeated"}');
        srv.kill();
        await srv.exitedPromise;
        await (victim === 'alpha' ? v.startA() : v.startB());
        calls = { alpha: client(v.A, alice), beta: client(v.B, bob) };
        killed++;
        log(`soak: SIGKILL ${victim} after ${sent} transfers (${killed}/${kills})`);
      }
    }
    stop = true;
    await Promise.all(traders);
    log(`soak: ${sent} transfers accepted, ${killed} kills; waiting for every one to resolve`);
    for (const [side, srv] of [['alpha', v.A], ['beta', v.B]]) {
      await waitFor(async () => (await new Admin(srv).request('GET', '/transfers?state=pending&limit=1')).json.length === 0, { timeout: 60000, interval: 200, what: `${side}: nothing pending` });
    }
    repeated += await counter(v.A, 'matchbook_venue_deposits_total{outcome="repeated"}');
    repeated += await counter(v.B, 'matchbook_venue_deposits_total{outcome="repeated"}');
    log(`soak: ${repeated} deliveries were repeats of transfers credited before (answered with the first credit)`);
    // Completed once and credited once, or refunded and absent.
    for (const [side, src, dst, dstVenue] of [['alpha', calls.alpha, calls.beta, 'beta'], ['beta', calls.beta, calls.alpha, 'alpha']]) {
      const withdrawals = await history(src, '/sapi/v1/capital/withdraw/history');
      const deposits = await history(dst, '/sapi/v1/capital/deposit/hisrec');
      const credited = new Map();
      for (const d of deposits) {
        if (!d.txId.startsWith(`${side}:`)) continue;
        check(!credited.has(d.txId), `${dstVenue} credited ${d.txId} twice`);
        credited.set(d.txId, d);
      }
      let completed = 0;
      for (const [id, a] of accepted[side]) {
        const w = withdrawals.find((x) => x.id === a.id);
        check(w, `${side}: withdrawal ${id} (${a.id}) missing from the history`);
        const d = credited.get(`${side}:${a.id}`);
        if (w.status === 6) {
          completed++;
          check(d && units(d.amount) === units(a.amount), `${side} ${a.id}: completed but ${dstVenue} shows ${JSON.stringify(d)}`);
        } else {
          check(w.status === 3 || w.status === 1, `${side} ${a.id}: status ${w.status} at the end`);
          check(!d, `${side} ${a.id}: refunded but credited on ${dstVenue}`);
        }
      }
      eq(credited.size, completed, `${dstVenue}: credits from ${side} = ${side}'s completed transfers`);
      log(`soak: ${side} -> ${dstVenue}: ${accepted[side].size} accepted, ${completed} completed, credited once each`);
    }
    // Conservation: each asset over both venues (the fee accounts included:
    // trades pay fees) = what was deposited.
    for (const coin of ['BTC', 'USDT']) {
      let sum = 0n;
      for (const [srv, id] of [[v.A, alice.accountId], [v.B, bob.accountId], [v.A, 0], [v.B, 0]]) {
        const b = await new Admin(srv).balances(id);
        sum += (b[coin]?.free ?? 0n) + (b[coin]?.locked ?? 0n);
      }
      eq(sum, units(coin === 'BTC' ? '2000' : '2000000'), `${coin} over both venues`);
    }
    await v.A.stop({ keepDataDir: true });
    await v.B.stop({ keepDataDir: true });
    for (const [d, cfg] of [[v.dataA, v.cfgA], [v.dataB, v.cfgB]]) {
      const out = execFileSync(bin, ['verify', '--data-dir', d, '--config', cfg], { encoding: 'utf8' });
      check(/invariants: ok/.test(out), `verify: ${out}`);
    }
    log(`soak: ok: ${sent} transfers, ${killed} kills, ${repeated} repeated deliveries, both journals verified`);
  } finally {
    v.close();
  }
}

async function bench() {
  const dispatch = arg('dispatch', 'pipelined');
  const rate = Number(arg('rate', 1000));
  const duration = Number(arg('duration', 10));
  const v = await startVenues(bin, {
    alpha: { transfers: `[transfers]\ndispatch = "${dispatch}"`, edit: unlimited },
    beta: { edit: unlimited },
    fsync: arg('fsync', 'fsync'),
  });
  try {
    const alice = await makeUser(v.A, 'alice', { BTC: '1000000' });
    const bob = await makeUser(v.B, 'bob', {});
    const call = client(v.A, alice, 64);
    const address = (await client(v.B, bob)('GET', '/sapi/v1/capital/deposit/address', { coin: 'BTC' })).json.address;
    const name = 'matchbook_transfer_completion_seconds';
    const h0 = await buckets(v.A, name);
    const cpu0 = [cpuSeconds(pidOf(v.A)), cpuSeconds(pidOf(v.B))];
    const t0 = Date.now();
    let sent = 0, ok = 0, inflight = 0;
    const errors = new Map();
    const window = 256;
    while (Date.now() - t0 < duration * 1000) {
      const due = rate > 0 ? Math.floor(((Date.now() - t0) / 1000) * rate) : sent + window;
      while (sent < due && inflight < window) {
        sent++;
        inflight++;
        call('POST', '/sapi/v1/capital/withdraw/apply', { coin: 'BTC', address, amount: '0.001' }).then((r) => {
          inflight--;
          if (r.status === 200) ok++;
          else errors.set(r.status, (errors.get(r.status) || 0) + 1);
        });
      }
      await sleep(rate > 0 && rate < 2000 ? 2 : 0);
    }
    while (inflight > 0) await sleep(5);
    const accepted_s = (Date.now() - t0) / 1000;
    await waitFor(async () => (await new Admin(v.A).request('GET', '/transfers?state=pending&limit=1')).json.length === 0, { timeout: 120000, interval: 100, what: 'every transfer completed' });
    const done_s = (Date.now() - t0) / 1000;
    const cpu1 = [cpuSeconds(pidOf(v.A)), cpuSeconds(pidOf(v.B))];
    const h1 = await buckets(v.A, name);
    const ms = (q) => (quantile(h0, h1, q) * 1000).toFixed(2);
    const completed = h1[h1.length - 1][1] - (h0.length ? h0[h0.length - 1][1] : 0);
    const max = h1.filter(([le, c], i) => c > (h0[i] ? h0[i][1] : 0)).map(([le]) => le)[0];
    const line = {
      dispatch, offered_per_s: rate, accepted: ok, refused: Object.fromEntries(errors), completed,
      accepted_per_s: +(ok / accepted_s).toFixed(0), completed_per_s: +(completed / done_s).toFixed(0),
      completion_ms: { p50: ms(0.5), p99: ms(0.99), p999: ms(0.999), max_bucket_ms: ms(1.0) },
      cpu_us_per_transfer: { alpha: +((cpu1[0] - cpu0[0]) / completed * 1e6).toFixed(0), beta: +((cpu1[1] - cpu0[1]) / completed * 1e6).toFixed(0) },
      namespaced: v.namespaced,
    };
    void max;
    console.log(JSON.stringify(line));
    await v.A.stop();
    await v.B.stop();
  } finally {
    v.close();
  }
}

runMain(`transfer_load ${mode}`, mode === 'bench' ? bench : soak, { timeoutMs: Number(arg('timeout', 1800)) * 1000 });

// HTTPS and WSS on the API port (run with --tls: a test CA made with openssl
// at test time, NODE_EXTRA_CA_CERTS): plain HTTP on the TLS port gets no
// answer; the certificate reloaded with SIGHUP while clients trade and
// subscribe drops no connection and no request, new connections get the new
// certificate, and a bad file on reload is refused with the old pair kept;
// a replica over TLS forwards signed calls and tunnels the WebSocket API to
// an https:// primary, whose certificate it checks with --primary-ca.
//
// Usage: node tls.mjs <matchbook binary> --tls

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import {
  Admin, RestClient, TLS, WsClient, binaryFromArgs, check, eq, fail, freePort, hmacHex,
  httpRequest, json, makeServerCert, makeTrader, runMain, startNats, startServer, step, waitFor,
  withServer,
} from './lib.mjs';

const bin = binaryFromArgs();
if (!TLS) {
  console.error('usage: node tls.mjs <matchbook binary> --tls');
  process.exit(2);
}

// The serial number of the certificate a new TLS connection is given.
function servedSerial(srv) {
  const u = new URL(srv.base);
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: u.hostname, port: Number(u.port), servername: 'localhost' }, () => {
      const serial = s.getPeerCertificate().serialNumber;
      s.end();
      resolve(serial);
    });
    s.on('error', reject);
  });
}

async function main(srv) {
  check(srv.base.startsWith('https://') && srv.wsBase.startsWith('wss://'),
    `a TLS server prints https/wss addresses: ${srv.base} ${srv.wsBase}`);
  const admin = new Admin(srv);

  await step('plain HTTP on the TLS port gets no answer', async () => {
    let answered = false;
    try {
      await httpRequest('GET', `${srv.base.replace('https:', 'http:')}/api/v3/ping`, { timeoutMs: 3000 });
      answered = true;
    } catch {
      // refused: the server speaks TLS only
    }
    check(!answered, 'plain HTTP was answered on the TLS port');
    eq(await servedSerial(srv), '01', 'the certificate served');
  });

  const alice = await makeTrader(admin, srv, 'alice', { USDT: '1000000' });
  const bob = await makeTrader(admin, srv, 'bob', { BTC: '100' });

  await step('SIGHUP reloads the certificate under load: no connection or request lost', async () => {
    const subscribers = [];
    for (let i = 0; i < 20; i++) subscribers.push(await WsClient.connect(`${srv.wsBase}/ws/btcusdt@trade`, { keep: false }));
    let trades = 0;
    for (const s of subscribers) s.onMessage((m) => { if (m && m.e === 'trade') trades++; });
    let ok = 0;
    const failures = [];
    let running = true;
    // Clients keep trading and reading over their keep-alive connections.
    const load = (async () => {
      for (let i = 0; running; i++) {
        try {
          const r = await (i % 2 === 0
            ? alice.rest.signed('POST', '/api/v3/order', { symbol: 'BTCUSDT', side: 'BUY', type: 'LIMIT', timeInForce: 'GTC', price: '30000', quantity: '0.001' })
            : bob.rest.signed('POST', '/api/v3/order', { symbol: 'BTCUSDT', side: 'SELL', type: 'LIMIT', timeInForce: 'GTC', price: '30000', quantity: '0.001' }));
          if (r.status === 200) ok++; else failures.push(`HTTP ${r.status} ${r.text.slice(0, 200)}`);
        } catch (e) {
          failures.push(e.message);
        }
      }
    })();
    await waitFor(() => ok >= 50, { timeout: 15000, what: '50 orders before the reload' });
    makeServerCert(TLS.dir, '02');
    srv.proc.kill('SIGHUP');
    await waitFor(() => srv.output.some((l) => l.includes('TLS certificate and key reloaded')),
      { timeout: 10000, what: 'the reload in the log' });
    const before = ok;
    await waitFor(() => ok >= before + 50, { timeout: 15000, what: '50 orders after the reload' });
    running = false;
    await load;
    eq(failures.length, 0, `requests that failed across the reload: ${json(failures.slice(0, 3))}`);
    await waitFor(() => trades >= 20 * 50, { timeout: 15000, what: 'trades on every subscriber' });
    for (const s of subscribers) check(s.closed === null, `a subscriber was closed by the reload: ${json(s.closed)}`);
    eq(await servedSerial(srv), '02', 'the certificate a new connection gets');
    for (const s of subscribers) s.close();
  });

  await step('a bad certificate on reload is refused and the pair in use stays', async () => {
    const fs = await import('node:fs');
    const path = await import('node:path');
    fs.writeFileSync(path.join(TLS.dir, 'server.pem'), 'not a certificate\n');
    const seen = srv.output.length;
    srv.proc.kill('SIGHUP');
    await waitFor(() => srv.output.slice(seen).some((l) => l.includes('was not reloaded')),
      { timeout: 10000, what: 'the refused reload in the log' });
    eq(await servedSerial(srv), '02', 'the certificate still served');
    const r = await httpRequest('GET', `${srv.base}/api/v3/ping`);
    eq(r.status, 200, 'a new request after the refused reload');
    if (r.status !== 200) fail(r.text);
  });
}

// A primary on NATS and a replica, both over TLS (startServer gives the
// replica --primary-ca with the test CA).
async function replicaOverTls() {
  makeServerCert(TLS.dir, '04');  // a good pair again after the refused reload
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'matchbook-tls-replica-'));
  const nats = await startNats(await freePort(), path.join(tmp, 'nats'));
  const servers = [];
  try {
    const primary = await startServer({ bin, name: 'primary', extraArgs: ['--nats', nats.url, '--trusted-replicas', '127.0.0.1'] });
    servers.push(primary);
    const replica = await startServer({
      bin, name: 'replica', command: 'replica',
      extraArgs: ['--nats', nats.url, '--primary', primary.base, '--bus-verify-key', path.join(primary.dataDir, 'bus.key.pub')],
    });
    servers.push(replica);
    await step('a replica forwards to an https:// primary and tunnels its WebSocket API', async () => {
      check(primary.base.startsWith('https://') && replica.base.startsWith('https://'), `${primary.base} ${replica.base}`);
      const t = await makeTrader(new Admin(primary), primary, 'carol', { USDT: '10000' });
      const via = new RestClient(replica.base, { apiKey: t.apiKey, secret: t.secret });
      const placed = await via.signed('POST', '/api/v3/order', { symbol: 'BTCUSDT', side: 'BUY', type: 'LIMIT', timeInForce: 'GTC', price: '20000', quantity: '0.001' });
      eq(placed.status, 200, `an order through the replica: ${placed.text}`);
      const open = await t.rest.signed('GET', '/api/v3/openOrders', { symbol: 'BTCUSDT' });
      eq(open.json.length, 1, 'the order is on the primary');
      const api = await WsClient.connect(`${replica.wsBase}/ws-api/v3`);
      const params = { apiKey: t.apiKey, timestamp: Date.now() };
      const text = Object.keys(params).sort().map((k) => `${k}=${params[k]}`).join('&');
      const acct = await api.request('account.status', { ...params, signature: hmacHex(t.secret, text) });
      eq(acct.status, 200, `account.status through the replica's tunnel: ${json(acct)}`);
      api.close();
    });
  } finally {
    for (const s of servers.reverse()) {
      try { await s.stop(); } catch { s.kill(); }
    }
    nats.kill();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

runMain('tls', async () => {
  await withServer({ bin, extraArgs: ['--weight-per-minute', '0', '--ip-weight-per-minute', '0'] }, main);
  await replicaOverTls();
}, { timeoutMs: 110000 });

// Shared harness of the end-to-end tests: starts `matchbook serve` on an
// ephemeral port with a fresh data directory, drives its operator API, signs
// REST calls the way Binance clients do, speaks WebSocket (package ws) and
// builds ccxt.pro.binance instances pointed at the server (API_COMPAT.md).
//
// Every wait has a timeout: a test fails with a message naming what it waited
// for, never hangs. runMain() exits the process non-zero on any failure.
//
// Runs on Node 18 and 20: global fetch, AbortSignal.timeout, node:crypto.

import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import ccxt from 'ccxt';
import WebSocket from 'ws';

export { ccxt, WebSocket };

// ---------------------------------------------------------------------------
// Process-wide safety nets.

const unhandled = [];
process.on('unhandledRejection', (reason) => {
  // ccxt leaves some rejections unhandled (bad WebSocket credentials, watch
  // futures rejected while a connection closes): keep them visible, never
  // let them crash or hang the run.
  unhandled.push(reason);
  const text = reason && reason.stack ? reason.stack : String(reason);
  if (process.env.E2E_VERBOSE) console.error(`(unhandled rejection) ${text.slice(0, 500)}`);
});
export function unhandledRejections() {
  return unhandled;
}

const children = new Set();
process.on('exit', () => {
  for (const child of children) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
});

// ---------------------------------------------------------------------------
// Small utilities.

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export function log(...args) {
  console.log(...args);
}

// Resolves with the promise's value, or rejects with "timeout: <what>" after ms.
export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timeout after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// Polls pred() (may be async) until it returns a truthy value, which is returned.
// On timeout throws with `what` and, when given, describe()'s view of the state.
export async function waitFor(pred, { timeout = 5000, interval = 20, what = 'condition', describe } = {}) {
  const deadline = Date.now() + timeout;
  let lastError;
  for (;;) {
    try {
      const v = await pred();
      if (v) return v;
      lastError = undefined;
    } catch (e) {
      lastError = e;
    }
    if (Date.now() >= deadline) {
      let detail = '';
      if (describe) {
        try {
          detail = `\n  state: ${describe()}`;
        } catch (e) {
          detail = `\n  state: (describe failed: ${e.message})`;
        }
      }
      if (lastError) detail += `\n  last error: ${lastError.message}`;
      throw new Error(`timeout after ${timeout} ms waiting for ${what}${detail}`);
    }
    await sleep(interval);
  }
}

export function json(value) {
  return JSON.stringify(value, (k, v) => (typeof v === 'bigint' ? v.toString() : v));
}

// A deviation from the expected behaviour that does not stop the scenario
// (the state it leaves is still well defined): recorded, printed, and the
// test fails at the end listing all of them.
const findings = [];
export function finding(message) {
  findings.push(message);
  log(`    FINDING: ${message}`);
}

// Runs fn under a timeout and labels any failure with the step's name.
export async function step(name, fn, timeoutMs = 30000) {
  const t0 = Date.now();
  try {
    const result = await withTimeout(Promise.resolve().then(fn), timeoutMs, `step "${name}"`);
    log(`  ok   ${name} (${Date.now() - t0} ms)`);
    return result;
  } catch (e) {
    log(`  FAIL ${name} (${Date.now() - t0} ms)`);
    if (e && typeof e === 'object' && !e.step) {
      e.step = name;
      e.message = `[${name}] ${e.message}`;
    }
    throw e;
  }
}

export function percentile(samples, p) {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[idx];
}

// Deterministic PRNG (mulberry32) so a failing random run can be repeated
// with E2E_SEED.
export function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  next.int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1));  // inclusive
  next.pick = (arr) => arr[Math.floor(next() * arr.length)];
  return next;
}

export function seedFromEnv() {
  const s = process.env.E2E_SEED ? Number(process.env.E2E_SEED) : (Date.now() & 0x7fffffff);
  return s;
}

// ---------------------------------------------------------------------------
// Exact decimals: BigInt counts of 10^-scale units (assets have scale 8).

export const SCALE = 8;

export function units(s, scale = SCALE) {
  const str = String(s).trim();
  const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(str);
  if (!m) throw new Error(`not a decimal: ${JSON.stringify(s)}`);
  const frac = (m[3] || '').replace(/0+$/, '');
  if (frac.length > scale) throw new Error(`decimal ${str} has more than ${scale} places`);
  const v = BigInt(m[2]) * 10n ** BigInt(scale) + BigInt((frac + '0'.repeat(scale)).slice(0, scale) || '0');
  return m[1] === '-' ? -v : v;
}

export function decimal(u, scale = SCALE) {
  const neg = u < 0n;
  const a = neg ? -u : u;
  const p = 10n ** BigInt(scale);
  const whole = a / p;
  let frac = (a % p).toString().padStart(scale, '0').replace(/0+$/, '');
  return (neg ? '-' : '') + whole.toString() + (frac ? '.' + frac : '');
}

// The JS number ccxt produces when it parses the decimal string of u.
export function num(u, scale = SCALE) {
  return Number(decimal(u, scale));
}

// a * b for two unit counts at the same scale (exact when the result is).
export function mulUnits(a, b, scale = SCALE) {
  const p = 10n ** BigInt(scale);
  if ((a * b) % p !== 0n) throw new Error(`product ${a}*${b} not exact at scale ${scale}`);
  return (a * b) / p;
}

// Canonical form of a decimal string ("30000.00000000" -> "30000").
export function canon(s) {
  return decimal(units(s));
}

// ---------------------------------------------------------------------------
// Assertions with readable messages.

export class AssertionError extends Error {}

export function fail(message) {
  throw new AssertionError(message);
}

export function check(cond, message) {
  if (!cond) fail(typeof message === 'function' ? message() : message);
}

export function eq(actual, expected, what) {
  if (actual !== expected) {
    fail(`${what}: expected ${json(expected)}, got ${json(actual)}`);
  }
}

export function deepEq(actual, expected, what) {
  const a = json(actual);
  const e = json(expected);
  if (a !== e) fail(`${what}:\n    expected ${e}\n    got      ${a}`);
}

// Awaits fn() and checks it throws an instance of ErrorClass (a ccxt error class).
export async function expectThrows(fn, ErrorClass, what, { not } = {}) {
  let result;
  try {
    result = await fn();
  } catch (e) {
    if (!(e instanceof ErrorClass)) {
      fail(`${what}: expected ${ErrorClass.name}, got ${e && e.constructor ? e.constructor.name : typeof e}: ${e && e.message}`);
    }
    if (not && e instanceof not) {
      fail(`${what}: expected ${ErrorClass.name} but not ${not.name}, got ${e.constructor.name}: ${e.message}`);
    }
    return e;
  }
  fail(`${what}: expected ${ErrorClass.name}, but the call succeeded with ${json(result && result.info !== undefined ? result.info : result).slice(0, 600)}`);
  return undefined;
}

// ---------------------------------------------------------------------------
// The server under test.

function tail(lines, n = 60) {
  return lines.slice(-n).join('\n');
}

// ---------------------------------------------------------------------------
// TLS.

// A server certificate for 127.0.0.1, localhost and the addresses in `ips`,
// signed by the test CA in dir (ca.pem, ca.key), written to dir/server.pem
// and dir/server.key; serial: its serial number (hex), so a reload can be
// told apart.
export function makeServerCert(dir, serial, ips = []) {
  const run = (args) => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
  };
  const names = ['IP:127.0.0.1', 'DNS:localhost', ...ips.map((ip) => `IP:${ip}`)].join(',');
  fs.writeFileSync(path.join(dir, 'server.ext'), `subjectAltName=${names}\nextendedKeyUsage=serverAuth\n`);
  run(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/CN=matchbook test server',
    '-keyout', 'next.key', '-out', 'server.csr']);
  run(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-set_serial', `0x${serial}`,
    '-days', '2', '-extfile', 'server.ext', '-out', 'next.pem']);
  // Both files replaced whole (rename), the key first: a reload reads a
  // complete pair or fails on a mismatch.
  fs.renameSync(path.join(dir, 'next.key'), path.join(dir, 'server.key'));
  fs.renameSync(path.join(dir, 'next.pem'), path.join(dir, 'server.pem'));
}

// `--tls` on a test's command line: a test CA and a server certificate are
// made with openssl in a temporary directory, and the test runs again with
// NODE_EXTRA_CA_CERTS naming the CA, so every client in it (fetch, ws, ccxt)
// trusts the server; startServer then gives serve its certificate. Null
// without --tls.
export const TLS = setUpTls();

function setUpTls() {
  if (!process.argv.includes('--tls')) return null;
  const given = process.env.MB_E2E_TLS_DIR;
  if (given) {
    return { dir: given, ca: path.join(given, 'ca.pem'), cert: path.join(given, 'server.pem'), key: path.join(given, 'server.key') };
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'matchbook-tls-'));
  const r = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-days', '2', '-subj', '/CN=matchbook test CA', '-keyout', 'ca.key', '-out', 'ca.pem'], { cwd: dir, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl: cannot make the test CA: ${r.stderr}`);
  makeServerCert(dir, '01');
  const child = spawnSync(process.execPath, process.argv.slice(1), {
    stdio: 'inherit',
    env: { ...process.env, NODE_EXTRA_CA_CERTS: path.join(dir, 'ca.pem'), MB_E2E_TLS_DIR: dir },
  });
  fs.rmSync(dir, { recursive: true, force: true });
  process.exit(child.status ?? 1);
}

export function binaryFromArgs() {
  const bin = process.argv[2] || process.env.MATCHBOOK_BIN;
  if (!bin) {
    console.error('usage: node <test>.mjs <path to matchbook> (or set MATCHBOOK_BIN)');
    process.exit(2);
  }
  if (!fs.existsSync(bin)) {
    console.error(`matchbook binary not found: ${bin}`);
    process.exit(2);
  }
  return path.resolve(bin);
}

// Starts `matchbook serve` (or `matchbook replica`: command) and resolves
// once it printed `ready`. dataDir: an existing one (a restart); default a
// new temporary one. port: the port to listen on (default 0: any). wrap: a
// command the server runs under (e.g. ['ip', 'netns', 'exec', NS]).
// Returns { base: 'http://127.0.0.1:PORT', wsBase: 'ws://127.0.0.1:PORT',
// apiUrl, wsUrl, adminToken, dataDir, proc, output, stop() }.
export async function startServer({ bin, extraArgs = [], startTimeoutMs = 30000, name = 'server', command = 'serve', dataDir: given, port = 0, wrap = [], fsync = 'none' } = {}) {
  const dataDir = given ?? fs.mkdtempSync(path.join(os.tmpdir(), 'matchbook-e2e-'));
  // A replica's primary speaks TLS too: the test CA checks it.
  const tls = TLS ? ['--tls-cert', TLS.cert, '--tls-key', TLS.key, ...(command === 'replica' ? ['--primary-ca', TLS.ca] : [])] : [];
  const args = [command, '--data-dir', dataDir, '--port', String(port), ...(command === 'serve' ? ['--fsync', fsync] : []), ...tls, ...extraArgs];
  const proc = wrap.length
    ? spawn(wrap[0], [...wrap.slice(1), bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(proc);
  const output = [];
  const verbose = !!process.env.E2E_VERBOSE;
  const srv = {
    bin, args, dataDir, proc, output, exited: null,
    base: undefined, wsBase: undefined, apiUrl: undefined, wsUrl: undefined, adminToken: undefined,
  };
  const exited = new Promise((resolve) => {
    proc.on('exit', (code, signal) => {
      children.delete(proc);
      srv.exited = { code, signal };
      resolve(srv.exited);
    });
  });
  srv.exitedPromise = exited;
  let onLine = () => {};
  const addLine = (stream) => (line) => {
    output.push(`[${stream}] ${line}`);
    if (output.length > 2000) output.splice(0, output.length - 1000);
    if (verbose) console.error(`[${name} ${stream}] ${line}`);
    if (stream === 'stdout') onLine(line);
  };
  readline.createInterface({ input: proc.stdout }).on('line', addLine('stdout'));
  readline.createInterface({ input: proc.stderr }).on('line', addLine('stderr'));

  const ready = new Promise((resolve, reject) => {
    let tokenPath;
    onLine = (line) => {
      let m;
      if ((m = /^api:\s*(\S+)/.exec(line))) {
        srv.apiUrl = m[1];
        srv.base = new URL(m[1]).origin;
      } else if ((m = /^ws:\s*(\S+)/.exec(line))) {
        srv.wsUrl = m[1];
        const u = new URL(m[1]);
        srv.wsBase = `${u.protocol}//${u.host}`;
      } else if ((m = /^admin token:\s*(.+)$/.exec(line))) {
        tokenPath = m[1].trim();
      } else if (line.trim() === 'ready') {
        if (!srv.base || !srv.wsBase || !tokenPath) {
          reject(new Error(`server printed "ready" before api:/ws:/admin token: lines`));
          return;
        }
        try {
          srv.adminToken = fs.readFileSync(tokenPath, 'utf8').trim();
        } catch (e) {
          reject(new Error(`cannot read the admin token file ${tokenPath}: ${e.message}`));
          return;
        }
        resolve();
      }
    };
    exited.then(({ code, signal }) => reject(new Error(`server exited before ready (code ${code}, signal ${signal})`)));
  });
  try {
    await withTimeout(ready, startTimeoutMs, `server start ("ready" on stdout) of ${bin} ${args.join(' ')}`);
  } catch (e) {
    proc.kill('SIGKILL');
    e.message += `\n--- server output ---\n${tail(output)}`;
    throw e;
  }

  // SIGTERM, then expect a clean exit 0 within the timeout.
  srv.stop = async ({ timeoutMs = 20000, keepDataDir = false } = {}) => {
    if (srv.exited) {
      throw new Error(`server had already exited (code ${srv.exited.code}, signal ${srv.exited.signal})\n--- server output ---\n${tail(output)}`);
    }
    proc.kill('SIGTERM');
    let result;
    try {
      result = await withTimeout(exited, timeoutMs, 'server exit after SIGTERM');
    } catch (e) {
      proc.kill('SIGKILL');
      throw new Error(`${e.message}\n--- server output ---\n${tail(output)}`);
    }
    if (!keepDataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    if (result.code !== 0 || result.signal !== null) {
      throw new Error(`server exit after SIGTERM: expected code 0, got code ${result.code} signal ${result.signal}\n--- server output ---\n${tail(output)}`);
    }
  };
  srv.kill = () => {
    if (!srv.exited) proc.kill('SIGKILL');
  };
  srv.outputTail = (n) => tail(output, n);
  return srv;
}

// Starts a server, runs fn(srv), then stops it (SIGTERM, exit 0 checked).
// A failure in fn wins over a failure to stop (both are reported).
export async function withServer(opts, fn) {
  const srv = await startServer(opts);
  log(`server: ${srv.base} (data dir ${srv.dataDir})`);
  let failure;
  try {
    await fn(srv);
  } catch (e) {
    failure = e;
  }
  try {
    await srv.stop();
    log('server: stopped cleanly (exit 0)');
  } catch (e) {
    if (!failure) throw e;
    console.error(`(also: ${e.message.split('\n')[0]})`);
    srv.kill();
  }
  if (failure) {
    if (failure.message && !failure.serverOutputAttached) {
      failure.serverOutputAttached = true;
      failure.serverTail = srv.outputTail(40);
    }
    throw failure;
  }
}

// Wraps a test's main: prints "<name>: ok" or the failure, exits 0/1, and
// bounds the whole run.
export function runMain(name, fn, { timeoutMs = 110000 } = {}) {
  const t0 = Date.now();
  const timer = setTimeout(() => {
    console.error(`${name}: FAIL: the whole test took longer than ${timeoutMs} ms`);
    process.exit(1);
  }, timeoutMs);
  timer.unref();
  log(`${name}: start`);
  Promise.resolve()
    .then(fn)
    .then(
      () => {
        if (findings.length) {
          console.error(`${name}: FAIL: ${findings.length} deviation(s):\n  - ${findings.join('\n  - ')}`);
          process.exit(1);
        }
        log(`${name}: ok (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
        process.exit(0);
      },
      (e) => {
        console.error(`${name}: FAIL: ${e && e.stack ? e.stack : e}`);
        if (findings.length) console.error(`(and ${findings.length} earlier deviation(s):\n  - ${findings.join('\n  - ')})`);
        if (e && e.serverTail) console.error(`--- server output (tail) ---\n${e.serverTail}`);
        process.exit(1);
      },
    );
}

// ---------------------------------------------------------------------------
// HTTP.

// One HTTP exchange. Returns { status, headers, text, json, ms }.
export async function httpRequest(method, url, { headers = {}, body, timeoutMs = 10000 } = {}) {
  const t0 = performance.now();
  let res;
  try {
    res = await fetch(url, { method, headers, body, signal: AbortSignal.timeout(timeoutMs) });
  } catch (e) {
    throw new Error(`${method} ${url} failed: ${e.message}${e.cause ? ` (${e.cause.message || e.cause})` : ''}`);
  }
  const text = await res.text();
  const ms = performance.now() - t0;
  let parsed;
  try {
    parsed = text.length ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, text, json: parsed, ms, method, url, body };
}

function describeExchange(res) {
  const req = `${res.method} ${res.url}${res.body ? `  body: ${res.body}` : ''}`;
  return `request: ${req}\n    response: HTTP ${res.status} ${res.text.slice(0, 800)}`;
}

// Throws unless HTTP 200 with a JSON body; returns the JSON.
export function expectOk(res, what) {
  if (res.status !== 200 || res.json === undefined) {
    fail(`${what}: expected HTTP 200 with JSON\n    ${describeExchange(res)}`);
  }
  return res.json;
}

// Throws unless the answer is an error with the given Binance code (and HTTP
// status when given); returns the JSON.
export function expectError(res, code, what, { status } = {}) {
  const ok = res.json && res.json.code === code && (status === undefined || res.status === status) && res.status >= 400;
  if (!ok) {
    fail(`${what}: expected an error {code:${code}}${status ? ` with HTTP ${status}` : ' with HTTP 4xx'}\n    ${describeExchange(res)}`);
  }
  return res.json;
}

export function encodeParams(params) {
  return Object.entries(params)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join('&');
}

export function hmacHex(secret, text) {
  return crypto.createHmac('sha256', secret).update(text).digest('hex');
}

// Public and signed REST calls against /api/v3 (Binance conventions).
export class RestClient {
  constructor(base, { apiKey, secret } = {}) {
    this.base = base;
    this.apiKey = apiKey;
    this.secret = secret;
  }

  async get(pathname, params = {}, opts = {}) {
    const qs = encodeParams(params);
    return httpRequest('GET', `${this.base}${pathname}${qs ? `?${qs}` : ''}`, opts);
  }

  // Signs the exact parameter bytes sent: timestamp and recvWindow appended
  // after the call's fields, signature last. GET/DELETE: query string; POST/
  // PUT: form body.
  async signed(method, pathname, params = {}, { timestamp, recvWindow = 5000, secret = this.secret, apiKey = this.apiKey, timeoutMs } = {}) {
    const all = { ...params, timestamp: timestamp ?? Date.now(), recvWindow };
    const qs = encodeParams(all);
    const signature = hmacHex(secret, qs);
    const signedText = `${qs}&signature=${signature}`;
    const headers = { 'X-MBX-APIKEY': apiKey };
    if (method === 'GET' || method === 'DELETE') {
      return httpRequest(method, `${this.base}${pathname}?${signedText}`, { headers, timeoutMs });
    }
    headers['Content-Type'] = 'application/x-www-form-urlencoded';
    return httpRequest(method, `${this.base}${pathname}`, { headers, body: signedText, timeoutMs });
  }
}

// ---------------------------------------------------------------------------
// NATS (JetStream) for the tests of the bus, replicas and standbys.

export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function canConnect(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

function natsBinary() {
  for (const p of ['/usr/sbin/nats-server', '/usr/bin/nats-server', '/usr/local/bin/nats-server']) {
    if (fs.existsSync(p)) return p;
  }
  throw new Error('nats-server is not installed (scripts/bootstrap.sh installs it)');
}

// A one-node JetStream server on `port`, its store in `dir` (kept across restarts).
export async function startNats(port, dir) {
  const proc = spawn(natsBinary(), ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', dir],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  const err = [];
  proc.stderr.on('data', (d) => err.push(String(d)));
  await waitFor(() => canConnect(port), { timeout: 10000, what: `nats-server on port ${port}`, describe: () => err.join('') });
  return {
    url: `nats://127.0.0.1:${port}`,
    async stop() {
      const done = new Promise((resolve) => proc.once('exit', resolve));
      proc.kill('SIGTERM');
      await done;
    },
    kill() { proc.kill('SIGKILL'); },
  };
}

// ---------------------------------------------------------------------------
// Operator API (/admin/v1).

export class Admin {
  constructor(srv) {
    this.base = srv.base;
    this.token = srv.adminToken;
  }

  async request(method, pathname, body) {
    const headers = { 'X-MB-ADMIN-TOKEN': this.token };
    let payload;
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      payload = JSON.stringify(body);
    }
    return httpRequest(method, `${this.base}/admin/v1${pathname}`, { headers, body: payload });
  }

  async createAccount(name) {
    const r = expectOk(await this.request('POST', '/accounts', { name }), `admin: create account ${name}`);
    check(Number.isInteger(r.accountId), `admin: create account ${name}: accountId missing in ${json(r)}`);
    eq(r.name, name, 'admin: create account: name');
    return r.accountId;
  }

  async createApiKey(accountId) {
    const r = expectOk(await this.request('POST', `/accounts/${accountId}/apiKeys`, {}), `admin: create API key of account ${accountId}`);
    check(typeof r.apiKey === 'string' && r.apiKey.length > 0, `admin: apiKey missing in ${json(r)}`);
    check(typeof r.secretKey === 'string' && r.secretKey.length > 0, `admin: secretKey missing in ${json(r)}`);
    eq(r.accountId, accountId, 'admin: create API key: accountId');
    return { apiKey: r.apiKey, secret: r.secretKey };
  }

  async deposit(accountId, asset, amount, ref) {
    const r = expectOk(await this.request('POST', '/deposits', { accountId, asset, amount: String(amount), ref }), `admin: deposit ${amount} ${asset} to ${accountId}`);
    eq(r.duplicate, false, `admin: deposit ${ref}: duplicate`);
    return r;
  }

  async account(accountId) {
    return expectOk(await this.request('GET', `/accounts/${accountId}`), `admin: get account ${accountId}`);
  }

  // { ASSET: { free: units, locked: units } } from the operator's view.
  async balances(accountId) {
    const acc = await this.account(accountId);
    const out = {};
    for (const b of acc.balances || []) out[b.asset] = { free: units(b.free), locked: units(b.locked) };
    return out;
  }
}

// Creates a funded account with an API key. deposits: { ASSET: '123.45' }.
export async function makeTrader(admin, srv, name, deposits) {
  const accountId = await admin.createAccount(name);
  const { apiKey, secret } = await admin.createApiKey(accountId);
  for (const [asset, amount] of Object.entries(deposits)) {
    await admin.deposit(accountId, asset, amount, `${name}-${asset}-initial`);
  }
  return { name, accountId, apiKey, secret, rest: new RestClient(srv.base, { apiKey, secret }) };
}

// ---------------------------------------------------------------------------
// WebSocket.

export class WsClient {
  // keep: retain every parsed message in this.messages (for waitFor over history).
  constructor(url, { keep = true } = {}) {
    this.url = url;
    this.keep = keep;
    this.messages = [];
    this.listeners = new Set();
    this.closed = null;  // { code, reason, at }
    this.nextId = 0;
    this.received = 0;
    this.bytes = 0;
    this.errors = [];
    this.ws = new WebSocket(url, { perMessageDeflate: false });
    this.countOnly = false;  // true: messages are only counted (no parsing, no listeners)
    this.ws.on('message', (data, isBinary) => {
      this.received++;
      this.bytes += data.length;
      if (this.countOnly) return;
      let msg;
      try {
        msg = JSON.parse(isBinary ? Buffer.from(data).toString('utf8') : data.toString());
      } catch (e) {
        this.errors.push(new Error(`non-JSON WebSocket message on ${url}: ${String(data).slice(0, 200)}`));
        return;
      }
      if (this.keep) this.messages.push(msg);
      for (const fn of this.listeners) fn(msg);
    });
    this.ws.on('error', (e) => this.errors.push(e));
    this.closedPromise = new Promise((resolve) => {
      this.ws.on('close', (code, reason) => {
        this.closed = { code, reason: reason ? reason.toString() : '', at: performance.now() };
        resolve(this.closed);
      });
    });
    this.openPromise = new Promise((resolve, reject) => {
      this.ws.once('open', resolve);
      this.ws.once('error', reject);
      this.ws.once('unexpected-response', (req, res) => reject(new Error(`WebSocket upgrade of ${url} refused: HTTP ${res.statusCode}`)));
    });
  }

  static async connect(url, opts = {}) {
    const c = new WsClient(url, opts);
    await withTimeout(c.openPromise, opts.timeoutMs ?? 5000, `WebSocket open ${url}`);
    return c;
  }

  onMessage(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  send(obj) {
    this.ws.send(JSON.stringify(obj));
  }

  // Resolves with the first message (already received when keep, or future)
  // satisfying pred.
  waitMessage(pred, timeoutMs = 5000, what = 'a matching message') {
    if (this.keep) {
      const found = this.messages.find(pred);
      if (found) return Promise.resolve(found);
    }
    let off;
    const p = new Promise((resolve, reject) => {
      off = this.onMessage((m) => {
        if (pred(m)) resolve(m);
      });
      this.closedPromise.then((c) => reject(new Error(`WebSocket ${this.url} closed (code ${c.code} ${c.reason}) while waiting for ${what}`)));
    });
    return withTimeout(p, timeoutMs, `${what} on ${this.url}`).finally(off);
  }

  // Sends {method, params, id} and resolves with the answer carrying that id.
  async request(method, params, timeoutMs = 5000) {
    const id = ++this.nextId;
    const answer = this.waitMessage((m) => m && m.id === id, timeoutMs, `the answer to ${method} ${json(params)} (id ${id})`);
    this.send({ method, params, id });
    return answer;
  }

  // SUBSCRIBE and check the Binance answer {"result":null,"id":N}.
  async subscribe(streams, timeoutMs = 5000) {
    const r = await this.request('SUBSCRIBE', streams, timeoutMs);
    if (!('result' in r) || r.result !== null) fail(`SUBSCRIBE ${json(streams)}: expected {"result":null,"id":...}, got ${json(r)}`);
    return r;
  }

  waitClose(timeoutMs = 5000) {
    return withTimeout(this.closedPromise, timeoutMs, `close of WebSocket ${this.url}`);
  }

  close() {
    try {
      this.ws.close(1000);
    } catch {
      // already closing
    }
  }

  terminate() {
    try {
      this.ws.terminate();
    } catch {
      // already gone
    }
  }
}

// ---------------------------------------------------------------------------
// ccxt.

// A ccxt.pro.binance instance pointed at the server, configured exactly as
// API_COMPAT.md describes. Records the server's subscription answers
// (ex.e2e.acks) and the raw user-data events (ex.e2e.execReports,
// ex.e2e.balanceEvents) for assertions beyond ccxt's unified caches.
export function makeCcxt(srv, { apiKey, secret, options = {} } = {}) {
  const H = srv.base;
  const W = srv.wsBase;
  const ex = new ccxt.pro.binance({
    apiKey,
    secret,
    enableRateLimit: false,
    httpAgent: new http.Agent(),
    timeout: 10000,
    urls: {
      api: {
        public: `${H}/api/v3`,
        private: `${H}/api/v3`,
        v1: `${H}/api/v1`,
        sapi: `${H}/sapi/v1`,
        ws: { spot: `${W}/ws`, margin: `${W}/ws`, 'ws-api': { spot: `${W}/ws-api/v3` } },
      },
    },
    options: {
      defaultType: 'spot',
      fetchMarkets: { types: ['spot'] },
      fetchCurrencies: false,
      fetchMargins: false,
      adjustForTimeDifference: false,
      fetchTradesMethod: 'publicGetTrades',
      fetchOpenOrders: { warnWithoutSymbol: false },
      ...options,
    },
  });
  const e2e = { acks: [], execReports: [], balanceEvents: [] };
  ex.e2e = e2e;
  const origAck = ex.handleSubscriptionStatus;
  ex.handleSubscriptionStatus = function (client, message) {
    e2e.acks.push({ url: client.url, id: message && message.id, message });
    return origAck.call(this, client, message);
  };
  const origOrder = ex.handleOrderUpdate;
  ex.handleOrderUpdate = function (client, message) {
    e2e.execReports.push(message);
    return origOrder.call(this, client, message);
  };
  const origBalance = ex.handleBalance;
  ex.handleBalance = function (client, message) {
    e2e.balanceEvents.push(message);
    return origBalance.call(this, client, message);
  };
  return ex;
}

// Keeps calling a ccxt watch*() so its cache stays live; the test then polls
// the cache (ex.orders, ex.orderbooks[...], ...) with waitFor(). Errors are
// kept in .errors; stop() ends the loop.
export function watchLoop(name, fn) {
  const st = { name, updates: 0, errors: [], stopped: false, last: undefined };
  st.done = (async () => {
    while (!st.stopped) {
      try {
        st.last = await fn();
        st.updates++;
      } catch (e) {
        if (st.stopped) break;
        st.errors.push(e);
        await sleep(100);
      }
    }
  })();
  st.stop = () => {
    st.stopped = true;
  };
  st.check = () => {
    if (st.errors.length) fail(`${name}: ${st.errors.length} error(s), first: ${st.errors[0].constructor.name}: ${st.errors[0].message}`);
  };
  return st;
}

// Compares a ccxt order book side ([[price, amount], ...]) with another.
export function sameLevels(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    if (a[i][0] !== b[i][0] || a[i][1] !== b[i][1]) return false;
  }
  return true;
}

// Two Matchbook venues for the transfer tests and the transfer benchmark:
// "alpha" in this network namespace and "beta" in a namespace of its own,
// joined by a veth pair, so every call between them crosses a real network
// stack. Where namespaces cannot be made (not root, no `ip`), both run on
// loopback and the log says so.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Admin, RestClient, TLS, eq, json, log, makeServerCert, startServer } from './lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const demo = fs.readFileSync(path.join(here, '../../config/matchbook.toml'), 'utf8');
export const SECRET = 'e2e-venue-secret-0123456789';

async function freePort(host) {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, host, () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// The namespace and its veth pair; null when they cannot be made.
function makeNamespace() {
  const ns = `mbx${process.pid % 100000}`;
  const octet = 1 + (process.pid % 250);
  const ip = (...args) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const remove = () => {
    try { execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' }); } catch { /* absent */ }
    try { execFileSync('ip', ['link', 'del', `${ns}a`], { stdio: 'ignore' }); } catch { /* absent */ }
  };
  try {
    ip('netns', 'add', ns);
    ip('link', 'add', `${ns}a`, 'type', 'veth', 'peer', 'name', `${ns}b`);
    ip('link', 'set', `${ns}b`, 'netns', ns);
    ip('addr', 'add', `10.213.${octet}.1/30`, 'dev', `${ns}a`);
    ip('link', 'set', `${ns}a`, 'up');
    ip('netns', 'exec', ns, 'ip', 'addr', 'add', `10.213.${octet}.2/30`, 'dev', `${ns}b`);
    ip('netns', 'exec', ns, 'ip', 'link', 'set', `${ns}b`, 'up');
    ip('netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up');
  } catch (e) {
    remove();
    log(`network: namespaces unavailable (${String(e.stderr || e.message).trim()}): both venues on loopback`);
    return null;
  }
  process.on('exit', remove);
  const n = { ns, hostA: `10.213.${octet}.1`, hostB: `10.213.${octet}.2`, remove };
  log(`network: beta in namespace ${ns} (${n.hostB}), alpha at ${n.hostA}, joined by a veth pair`);
  return n;
}

// The demo configuration as venue `name`, linked to `other` at otherUrl. The
// operator API is opened: the tests reach each venue on its veth address
// (in plain text only with admin_remote_plaintext).
// Under --tls (lib.mjs) the venues call each other over https://, checked
// with the test CA.
function configText(name, other, otherUrl, { transfers = '', edit = (t) => t } = {}) {
  // Without TLS the operator API answers remote clients only when plain
  // text is allowed explicitly.
  const open = TLS ? 'admin_remote = true' : 'admin_remote = true\nadmin_remote_plaintext = true';
  const body = edit(demo.replace(/^admin_remote = false$/m, open));
  const ca = TLS ? `ca_file = "${TLS.ca}"\n` : '';
  return `venue = "${name}"\n${body}\n${transfers}\n[[venues]]\nname = "${other}"\nurl = "${otherUrl}"\nsecret = "${SECRET}"\n${ca}`;
}

// Starts both venues. options.alpha / options.beta: { transfers: TOML text of
// a [transfers] table, edit: (configuration text) => text }. Returns
// { A, B, startA, startB, cfgA, cfgB, dataA, dataB, namespaced, close() }:
// startA/startB (re)start a venue on its data directory (A and B are
// replaced); close() kills both and removes everything.
export async function startVenues(bin, options = {}) {
  const n = makeNamespace();
  const hostA = n ? n.hostA : '127.0.0.1';
  const hostB = n ? n.hostB : '127.0.0.1';
  const portA = await freePort(hostA);
  const portB = n ? 18000 + (process.pid % 20000) : await freePort(hostB);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'matchbook-xfer-'));
  const cfgA = path.join(dir, 'alpha.toml');
  const cfgB = path.join(dir, 'beta.toml');
  const scheme = TLS ? 'https' : 'http';
  if (TLS) makeServerCert(TLS.dir, '03', [hostA, hostB]);  // the certificate names both addresses
  fs.writeFileSync(cfgA, configText('alpha', 'beta', `${scheme}://${hostB}:${portB}`, options.alpha));
  fs.writeFileSync(cfgB, configText('beta', 'alpha', `${scheme}://${hostA}:${portA}`, options.beta));
  const dataA = fs.mkdtempSync(path.join(os.tmpdir(), 'matchbook-alpha-'));
  const dataB = fs.mkdtempSync(path.join(os.tmpdir(), 'matchbook-beta-'));
  const fsync = options.fsync ?? 'fsync';
  const v = {
    cfgA, cfgB, dataA, dataB, namespaced: !!n, A: null, B: null,
    async startA() {
      v.A = await startServer({ bin, name: 'alpha', dataDir: dataA, port: portA, fsync, extraArgs: ['--config', cfgA, '--host', hostA] });
      return v.A;
    },
    async startB() {
      v.B = await startServer({ bin, name: 'beta', dataDir: dataB, port: portB, fsync, wrap: n ? ['ip', 'netns', 'exec', n.ns] : [], extraArgs: ['--config', cfgB, '--host', hostB] });
      return v.B;
    },
    close() {
      for (const s of [v.A, v.B]) if (s) s.kill();
      for (const d of [dataA, dataB, dir]) fs.rmSync(d, { recursive: true, force: true });
      if (n) n.remove();
    },
  };
  try {
    await v.startA();
    await v.startB();
  } catch (e) {
    v.close();  // nothing left behind: processes, directories, the namespace
    throw e;
  }
  return v;
}

// An account with a key of the given permissions and its deposits
// ({ ASSET: '12.5' }). Returns { accountId, apiKey, secret, rest }.
export async function makeUser(srv, name, deposits, permissions = ['READ', 'TRADE', 'WITHDRAW']) {
  const admin = new Admin(srv);
  const accountId = await admin.createAccount(name);
  const k = await admin.request('POST', `/accounts/${accountId}/apiKeys`, { permissions });
  eq(k.status, 200, `${name}: key with ${permissions}: ${k.text}`);
  eq(json(k.json.permissions), json(permissions), `${name}: the key's permissions`);
  for (const [asset, amount] of Object.entries(deposits)) await admin.deposit(accountId, asset, amount, `${name}-${asset}`);
  return { accountId, apiKey: k.json.apiKey, secret: k.json.secretKey, rest: new RestClient(srv.base, { apiKey: k.json.apiKey, secret: k.json.secretKey }) };
}

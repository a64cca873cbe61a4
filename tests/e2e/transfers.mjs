// Transfers between two venues, end to end: venue "alpha" in this network
// namespace, venue "beta" in a namespace of its own joined by a veth pair,
// so every call between them crosses a real network stack (loopback when
// namespaces cannot be made: the log says so). ccxt 4.5.84, unmodified:
// fetchDepositAddress, withdraw, fetchWithdrawals, fetchDeposits and
// fetchCurrencies (/sapi/v1/capital/config/getall). Then what must never
// happen: a transfer credited twice, funds lost across a SIGKILL of the
// source or an outage of the destination, a refused or forged call that
// changes anything.
//
// Usage: node transfers.mjs <path to matchbook>
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

import {
  Admin, binaryFromArgs, ccxt, check, eq, expectThrows, hmacHex, httpRequest, json, log,
  makeCcxt, runMain, sleep, step, units, waitFor, watchLoop, withTimeout,
} from './lib.mjs';
import { SECRET, makeUser, startVenues } from './venues.mjs';

const bin = binaryFromArgs();

// Beta suspends USDT deposits (a transfer of USDT to it is refused and
// refunded) and closes idle connections after 300 ms (alpha's kept-alive
// connections go stale between transfers).
function betaConfig(toml) {
  return toml.replace(/^(symbol = "USDT"\nscale = \d+)$/m, '$1\ndeposit_enabled = false')
    .replace(/^idle_timeout_ms = \d+$/m, 'idle_timeout_ms = 300');
}

runMain('transfers', async () => {
  const v = await startVenues(bin, {
    // Sequential: its one connection is the one beta closes while idle.
    alpha: { transfers: '[transfers]\ndispatch = "sequential"\nretry_max_ms = 500' },
    beta: { edit: betaConfig },
  });
  check(/deposit_enabled = false/.test(fs.readFileSync(v.cfgB, 'utf8')) && /idle_timeout_ms = 300$/m.test(fs.readFileSync(v.cfgB, 'utf8')), 'beta config: USDT deposits suspended, idle connections closed after 300 ms');
  let A = v.A;
  let B = v.B;
  const startA = () => v.startA();
  const startB = () => v.startB();
  try {
    const adminA = new Admin(A);
    const adminB = new Admin(B);
    const alice = await makeUser(A, 'alice', { BTC: '10', USDT: '1000' });
    const bob = await makeUser(B, 'bob', { ETH: '5' });
    const carol = await makeUser(A, 'carol', { BTC: '1' }, ['READ', 'TRADE']);
    const exA = () => makeCcxt(A, { apiKey: alice.apiKey, secret: alice.secret, options: { fetchCurrencies: true } });
    const exB = () => makeCcxt(B, { apiKey: bob.apiKey, secret: bob.secret, options: { fetchCurrencies: true } });
    let ccA = exA();
    let ccB = exB();
    const free = async (ex, coin) => units(String((await ex.fetchBalance()).free[coin] ?? 0));

    let bobBtcAddress;
    await step('ccxt: currencies and deposit addresses', async () => {
      const cur = await ccA.fetchCurrencies();
      check(cur.BTC && cur.BTC.withdraw === true && cur.BTC.deposit === true, `fetchCurrencies BTC: ${json(cur.BTC && { withdraw: cur.BTC.withdraw, deposit: cur.BTC.deposit })}`);
      eq(String(cur.BTC.fee ?? cur.BTC.networks?.MB?.fee ?? 0), '0', 'fetchCurrencies: BTC withdrawal fee (the demo configuration: 0)');
      const a = await ccB.fetchDepositAddress('BTC');
      bobBtcAddress = a.address;
      check(bobBtcAddress.startsWith(`beta:${bob.accountId}:BTC:`), `deposit address names venue, account, asset: ${bobBtcAddress}`);
      eq((await ccB.fetchDepositAddress('BTC')).address, bobBtcAddress, 'the deposit address is stable');
    });

    let firstId;
    await step('ccxt: withdraw BTC alpha -> beta', async () => {
      // The user-data streams carry the hold and the credit as balanceUpdate.
      await withTimeout(ccA.authenticate({ type: 'spot' }), 5000, 'alice user data subscription');
      await withTimeout(ccB.authenticate({ type: 'spot' }), 5000, 'bob user data subscription');
      const loops = [watchLoop('watchBalance(alice)', () => ccA.watchBalance()), watchLoop('watchBalance(bob)', () => ccB.watchBalance())];
      await sleep(200);
      const w = await ccA.withdraw('BTC', 1.5, bobBtcAddress);
      firstId = w.id;
      check(typeof firstId === 'string' && firstId.length > 0, `withdraw id: ${json(w.info)}`);
      // The amount leaves the balance at once: neither free nor locked.
      const bal = await ccA.fetchBalance();
      eq(units(String(bal.free.BTC)), units('8.5'), 'alice BTC free right after the withdrawal');
      eq(units(String(bal.used.BTC ?? 0)), 0n, 'alice BTC locked: the hold is not an order');
      await waitFor(async () => (await free(ccB, 'BTC')) === units('1.5'), { timeout: 10000, what: 'bob credited 1.5 BTC on beta' });
      await waitFor(async () => {
        const ws = await ccA.fetchWithdrawals('BTC');
        return ws.some((x) => x.id === firstId && x.status === 'ok');
      }, { timeout: 10000, what: 'the withdrawal completed on alpha' });
      const ws = await ccA.fetchWithdrawals('BTC');
      const mine = ws.find((x) => x.id === firstId);
      eq(mine.amount, 1.5, 'fetchWithdrawals amount');
      eq(mine.address, bobBtcAddress, 'fetchWithdrawals address');
      eq(mine.txid, `alpha:${firstId}`, 'fetchWithdrawals txid');
      const ds = await ccB.fetchDeposits('BTC');
      const d = ds.find((x) => x.txid === `alpha:${firstId}`);
      check(d && d.amount === 1.5 && d.status === 'ok', `fetchDeposits on beta: ${json(ds.map((x) => x.info))}`);
      const update = (ex, delta) => ex.e2e.balanceEvents.some((m) => m.e === 'balanceUpdate' && m.a === 'BTC' && units(m.d) === units(delta));
      await waitFor(() => update(ccA, '-1.5') && update(ccB, '1.5'), { timeout: 5000, what: 'balanceUpdate -1.5 BTC on alpha and +1.5 BTC on beta', describe: () => json([ccA.e2e.balanceEvents, ccB.e2e.balanceEvents]) });
      for (const l of loops) {
        l.stop();
        l.check();
      }
    });

    await step('ccxt: withdraw ETH beta -> alpha', async () => {
      const addr = (await ccA.fetchDepositAddress('ETH')).address;
      const w = await ccB.withdraw('ETH', 2, addr);
      await waitFor(async () => (await free(ccA, 'ETH')) === units('2'), { timeout: 10000, what: 'alice credited 2 ETH on alpha' });
      await waitFor(async () => (await ccB.fetchWithdrawals('ETH')).some((x) => x.id === w.id && x.status === 'ok'), { timeout: 10000, what: 'the ETH withdrawal completed on beta' });
      eq(await free(ccB, 'ETH'), units('3'), 'bob ETH after sending 2');
    });

    await step('bad inputs: a clear error, no change', async () => {
      const before = await free(ccA, 'BTC');
      const refused = async (params, code, what, client = alice.rest) => {
        const r = await client.signed('POST', '/sapi/v1/capital/withdraw/apply', params);
        check(r.status >= 400 && r.json && r.json.code === code, `${what}: expected code ${code}, got ${r.status} ${r.text}`);
      };
      const typo = bobBtcAddress.slice(0, -1) + (bobBtcAddress.endsWith('0') ? '1' : '0');
      await refused({ coin: 'BTC', address: bobBtcAddress, amount: '0.123456789' }, -4021, 'too many decimals');
      await refused({ coin: 'BTC', address: bobBtcAddress, amount: '0' }, -1130, 'zero');
      await refused({ coin: 'BTC', address: bobBtcAddress, amount: '-1' }, -1130, 'negative');
      await refused({ coin: 'BTC', address: bobBtcAddress, amount: '100' }, -4026, 'above available');
      await refused({ coin: 'XYZ', address: bobBtcAddress, amount: '1' }, -4018, 'unknown coin');
      await refused({ coin: 'BTC', address: typo, amount: '1' }, -4033, 'mistyped address');
      await refused({ coin: 'ETH', address: bobBtcAddress, amount: '1' }, -4033, 'an address for another asset');
      const own = (await ccA.fetchDepositAddress('BTC')).address;
      await refused({ coin: 'BTC', address: own, amount: '1' }, -4033, 'an address of this venue');
      await refused({ coin: 'BTC', address: bobBtcAddress, amount: '0.1' }, -2015, 'a key without WITHDRAW', carol.rest);
      // ccxt maps the wallet codes (-4026: InsufficientFunds) only on Binance's
      // own hosts; elsewhere it uses its common table, where -4026 is BadRequest.
      await expectThrows(() => ccA.withdraw('BTC', 100, bobBtcAddress), ccxt.BadRequest, 'ccxt: withdraw above available');
      // withdrawOrderId: the same withdrawal is answered with its id; other parameters are refused.
      const r1 = await alice.rest.signed('POST', '/sapi/v1/capital/withdraw/apply', { coin: 'BTC', address: bobBtcAddress, amount: '0.25', withdrawOrderId: 'e2e-1' });
      eq(r1.status, 200, `withdrawOrderId first use: ${r1.text}`);
      const r2 = await alice.rest.signed('POST', '/sapi/v1/capital/withdraw/apply', { coin: 'BTC', address: bobBtcAddress, amount: '0.25', withdrawOrderId: 'e2e-1' });
      eq(r2.json && r2.json.id, r1.json.id, `withdrawOrderId reused with the same parameters: ${r2.text}`);
      await refused({ coin: 'BTC', address: bobBtcAddress, amount: '0.3', withdrawOrderId: 'e2e-1' }, -1130, 'withdrawOrderId reused with another amount');
      await waitFor(async () => (await free(ccB, 'BTC')) === units('1.75'), { timeout: 10000, what: 'bob credited the one 0.25 BTC once' });
      eq(await free(ccA, 'BTC'), before - units('0.25'), 'alice BTC: only the one accepted withdrawal left');
    });

    await step('a kept-alive connection the destination closed is not an outage', async () => {
      const errors = async () => (await adminA.request('GET', '/venues')).json.links.beta.errors;
      const before = await errors();
      await sleep(800);  // beta closes alpha's idle connections meanwhile
      const w = await ccA.withdraw('BTC', 0.01, bobBtcAddress);
      await waitFor(async () => (await ccA.fetchWithdrawals('BTC')).some((x) => x.id === w.id && x.status === 'ok'), { timeout: 5000, what: 'completed over a new connection' });
      eq(await errors(), before, 'link errors after an idle close');
      eq((await adminA.request('GET', '/venues')).json.links.beta.reachable, true, 'the link stays reachable');
    });

    await step('the destination refuses: refunded, reason in the history', async () => {
      const usdt = (await ccB.fetchDepositAddress('USDT')).address;
      const w = await ccA.withdraw('USDT', 100, usdt);
      await waitFor(async () => (await ccA.fetchWithdrawals('USDT')).some((x) => x.id === w.id && x.status === 'failed'), { timeout: 10000, what: 'the USDT withdrawal refunded' });
      const raw = await alice.rest.signed('GET', '/sapi/v1/capital/withdraw/history', { coin: 'USDT' });
      const item = raw.json.find((x) => x.id === w.id);
      eq(item.status, 3, 'withdraw history status of a refused transfer (Binance: 3 rejected)');
      check(/refused/i.test(item.info || ''), `the reason is shown: ${json(item)}`);
      eq(await free(ccA, 'USDT'), units('1000'), 'alice USDT back after the refund');
      eq(await free(ccB, 'USDT'), 0n, 'bob received no USDT');
    });

    await step('venue calls: forged, stale and replayed', async () => {
      const url = `${B.base}/venue/v1/transfers`;
      const body = JSON.stringify({ transfers: [{ id: Number(firstId), coin: 'BTC', amount: '1.5', address: bobBtcAddress }] });
      const send = (ts, sig, from = 'alpha') => httpRequest('POST', url, { headers: { 'Content-Type': 'application/json', 'X-MB-Venue': from, 'X-MB-Timestamp': String(ts), 'X-MB-Signature': sig }, body });
      const signFor = (ts, secret = SECRET) => hmacHex(secret, `${ts}\nPOST\n/venue/v1/transfers\n${body}`);
      const now = Date.now();
      eq((await send(now, signFor(now, 'wrong-secret-0123456789'))).status, 401, 'a wrong credential is refused');
      eq((await send(now - 60000, signFor(now - 60000))).status, 401, 'a stale timestamp is refused');
      eq((await send(now, signFor(now), 'gamma')).status, 401, 'an unknown venue is refused');
      // A well-signed replay of a transfer already credited: answered with the first credit, nothing moves.
      const before = await free(ccB, 'BTC');
      const r = await send(Date.now(), signFor(Date.now()));
      eq(r.status, 200, `a replayed delivery: ${r.text}`);
      eq(r.json.results[0].status, 'CREDITED', 'a replayed delivery is answered as credited');
      eq(await free(ccB, 'BTC'), before, 'a replayed delivery credits nothing');
      const logs = B.outputTail(200);
      check(/venue call refused/.test(logs), 'refused venue calls are logged');
    });

    await step('the destination down: pending ("processing"), then completed', async () => {
      await B.stop({ keepDataDir: true });
      const before = await free(ccA, 'BTC');
      const w = await ccA.withdraw('BTC', 1, bobBtcAddress);
      await sleep(1500);
      const pending = (await ccA.fetchWithdrawals('BTC')).find((x) => x.id === w.id);
      eq(pending.status, 'pending', 'a withdrawal waiting for the destination');
      const raw = await alice.rest.signed('GET', '/sapi/v1/capital/withdraw/history', { coin: 'BTC' });
      eq(raw.json.find((x) => x.id === w.id).status, 4, 'Binance status 4 (processing)');
      eq(await free(ccA, 'BTC'), before - units('1'), 'held while pending');
      const venues = (await adminA.request('GET', '/venues')).json;
      check(venues.links.beta.errors > 0 && venues.links.beta.pending >= 1, `link health shows the outage: ${json(venues.links.beta)}`);
      const listed = (await adminA.request('GET', '/transfers?state=pending')).json;
      check(listed.some((x) => String(x.id) === w.id), `GET /admin/v1/transfers?state=pending lists it: ${json(listed)}`);
      // A second one is voided by the operator while the destination is down.
      const v = await ccA.withdraw('BTC', 0.5, bobBtcAddress);
      const voided = await adminA.request('POST', `/transfers/${v.id}/void`);
      eq(voided.status, 200, `void: ${voided.text}`);
      eq((await adminA.request('POST', `/transfers/${v.id}/void`)).status, 409, 'a second void is refused');
      B = await startB();
      ccB = exB();
      await waitFor(async () => (await ccA.fetchWithdrawals('BTC')).some((x) => x.id === w.id && x.status === 'ok'), { timeout: 15000, what: 'completed once beta is back' });
      eq(await free(ccB, 'BTC'), units('2.76'), 'bob: the delivered 1 BTC, not the voided 0.5');
      eq((await ccA.fetchWithdrawals('BTC')).find((x) => x.id === v.id).status, 'canceled', 'a voided withdrawal (Binance status 1)');
    });

    await step('SIGKILL of the source with transfers in flight and pending', async () => {
      // 20 while beta takes them (some in flight at the kill), 20 while it is down.
      const ids = [];
      for (let i = 0; i < 20; i++) ids.push((await ccA.withdraw('BTC', 0.01, bobBtcAddress)).id);
      await B.stop({ keepDataDir: true });
      for (let i = 0; i < 20; i++) ids.push((await ccA.withdraw('BTC', 0.01, bobBtcAddress)).id);
      A.kill();
      await A.exitedPromise;
      B = await startB();
      ccB = exB();
      A = await startA();
      ccA = exA();
      await waitFor(async () => {
        const ws = await ccA.fetchWithdrawals('BTC');
        return ids.every((id) => ws.some((x) => x.id === id && x.status === 'ok'));
      }, { timeout: 20000, what: 'every transfer completed after the restart' });
      eq(await free(ccB, 'BTC'), units('3.16'), 'bob credited each of the 40 once');
    });

    await step('conservation and the operator list', async () => {
      const sum = async (admin, id) => admin.balances(id);
      const a = await sum(adminA, alice.accountId);
      const b = await sum(adminB, bob.accountId);
      const total = (coin) => (a[coin]?.free ?? 0n) + (a[coin]?.locked ?? 0n) + (b[coin]?.free ?? 0n) + (b[coin]?.locked ?? 0n);
      eq(total('BTC'), units('10'), 'BTC over both venues = what was deposited');
      eq(total('ETH'), units('5'), 'ETH over both venues = what was deposited');
      eq(total('USDT'), units('1000'), 'USDT over both venues = what was deposited');
      eq((await adminA.request('GET', '/transfers?state=pending')).json.length, 0, 'nothing pending at the end');
      eq((await adminA.request('GET', '/transfers?state=completed')).json.length, 44, 'completed transfers listed (1.5, 0.25, 0.01, 1 and 40 x 0.01 BTC)');
      eq((await adminA.request('GET', '/transfers?state=refunded')).json.length, 2, 'refunded transfers listed (the refused USDT, the voided BTC)');
      eq((await adminA.request('GET', '/transfers?state=bogus')).status, 400, 'a bad state is refused');
    });
    await A.stop({ keepDataDir: true });
    await B.stop({ keepDataDir: true });
    for (const [name, d, cfg] of [['alpha', v.dataA, v.cfgA], ['beta', v.dataB, v.cfgB]]) {
      const out = execFileSync(bin, ['verify', '--data-dir', d, '--config', cfg], { encoding: 'utf8' });
      check(/ok|verified/i.test(out), `matchbook verify ${name}: ${out}`);
      log(`verify ${name}: ${out.trim().split('\n').pop()}`);
    }
  } finally {
    v.close();
  }
}, { timeoutMs: 170000 });

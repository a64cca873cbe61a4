// The real ccxt client (ccxt.pro.binance 4.5.84, unmodified) trading through
// Matchbook's WebSocket API at /ws-api/v3: every *Ws() trading call, with
// values asserted, and the errors ccxt maps from the answers.
//
// Usage: node ccxt_ws_api.mjs <matchbook binary>   (or MATCHBOOK_BIN)
//
// Scenario on BTC/USDT (10 bps maker and taker; the buyer pays its fee in
// BTC, the seller in USDT):
//   alice 100000 USDT, bob 10 BTC
//   A  alice createOrderWs buy 0.2 @ 30000 (rests); fetchOrderWs: open
//   B  bob createOrderWs market sell 0.05  -> trade 0.05 @ 30000 (alice maker)
//      alice fetchOrderWs: filled 0.05; fetchMyTradesWs: the trade and its fee
//   C  alice editOrderWs A -> buy 0.1 @ 29000 (cancelReplace); A is canceled
//   D  alice createOrderWs buy 0.01 @ 28000; fetchOpenOrdersWs: C and D
//   E  alice cancelOrderWs C; cancelAllOrdersWs cancels D; nothing open
//   F  fetchBalanceWs of both: exact to the smallest unit (the raw answer:
//      ccxt reads account.status with its futures layout)
//   G  an order over the balance: InsufficientFunds; an unknown order:
//      OrderNotFound; the connection still trades afterwards

import {
  Admin, binaryFromArgs, ccxt, check, eq, expectThrows, json, makeCcxt, makeTrader, runMain, step,
  withServer,
} from './lib.mjs';

const SYM = 'BTC/USDT';
const bin = binaryFromArgs();

async function main(srv) {
  const admin = new Admin(srv);
  const alice = await makeTrader(admin, srv, 'alice', { USDT: '100000' });
  const bob = await makeTrader(admin, srv, 'bob', { BTC: '10' });
  const exA = makeCcxt(srv, { apiKey: alice.apiKey, secret: alice.secret });
  const exB = makeCcxt(srv, { apiKey: bob.apiKey, secret: bob.secret });
  await exA.loadMarkets();
  await exB.loadMarkets();

  let a;
  await step('A: createOrderWs limit buy rests; fetchOrderWs sees it', async () => {
    a = await exA.createOrderWs(SYM, 'limit', 'buy', 0.2, 30000);
    check(typeof a.id === 'string' && a.id.length > 0, `order id missing: ${json(a)}`);
    eq(a.status, 'open', 'A status');
    eq(a.amount, 0.2, 'A amount');
    eq(a.price, 30000, 'A price');
    eq(a.filled, 0, 'A filled');
    eq(a.side, 'buy', 'A side');
    eq(a.type, 'limit', 'A type');
    const f = await exA.fetchOrderWs(a.id, SYM);
    eq(f.id, a.id, 'fetchOrderWs id');
    eq(f.status, 'open', 'fetchOrderWs status');
    eq(f.remaining, 0.2, 'fetchOrderWs remaining');
  });

  await step('B: createOrderWs market sell fills against A', async () => {
    const b = await exB.createOrderWs(SYM, 'market', 'sell', 0.05);
    eq(b.status, 'closed', 'B status');
    eq(b.filled, 0.05, 'B filled');
    eq(b.average, 30000, 'B average');
    eq(b.cost, 1500, 'B cost');
    const f = await exA.fetchOrderWs(a.id, SYM);
    eq(f.status, 'open', 'A after the fill: status');
    eq(f.filled, 0.05, 'A after the fill: filled');
    eq(f.remaining, 0.15, 'A after the fill: remaining');
    const trades = await exA.fetchMyTradesWs(SYM);
    eq(trades.length, 1, 'alice trades');
    const t = trades[0];
    eq(t.order, a.id, 'trade order');
    eq(t.price, 30000, 'trade price');
    eq(t.amount, 0.05, 'trade amount');
    eq(t.side, 'buy', 'trade side');
    eq(t.takerOrMaker, 'maker', 'trade maker');
    eq(t.fee.currency, 'BTC', 'trade fee currency');
    eq(t.fee.cost, 0.00005, 'trade fee');
  });

  let c;
  await step('C: editOrderWs replaces A (order.cancelReplace)', async () => {
    c = await exA.editOrderWs(a.id, SYM, 'limit', 'buy', 0.1, 29000);
    check(c.id !== a.id, `the replacement has a new id: ${json(c)}`);
    eq(c.status, 'open', 'C status');
    eq(c.price, 29000, 'C price');
    eq(c.amount, 0.1, 'C amount');
    const old = await exA.fetchOrderWs(a.id, SYM);
    eq(old.status, 'canceled', 'A after the replace');
    eq(old.filled, 0.05, 'A keeps its fill');
  });

  let d;
  await step('D: fetchOpenOrdersWs lists C and D', async () => {
    d = await exA.createOrderWs(SYM, 'limit', 'buy', 0.01, 28000);
    eq(d.status, 'open', 'D status');
    const open = await exA.fetchOpenOrdersWs(SYM);
    eq(open.map((o) => o.id).sort().join(','), [c.id, d.id].sort().join(','), 'open order ids');
    eq(open.map((o) => o.price).sort().join(','), '28000,29000', 'open order prices');
  });

  await step('E: cancelOrderWs and cancelAllOrdersWs', async () => {
    const x = await exA.cancelOrderWs(c.id, SYM);
    eq(x.id, c.id, 'canceled id');
    eq(x.status, 'canceled', 'cancelOrderWs status');
    const all = await exA.cancelAllOrdersWs(SYM);
    eq(all.length, 1, 'cancelAllOrdersWs count');
    eq(all[0].id, d.id, 'cancelAllOrdersWs id');
    eq(all[0].status, 'canceled', 'cancelAllOrdersWs status');
    eq((await exA.fetchOpenOrdersWs(SYM)).length, 0, 'open orders after cancel all');
  });

  // ccxt 4.5.84 parses the answer of account.status with its futures layout
  // (result.assets), so the unified fields stay empty for spot; the raw
  // answer is in .info, and is checked here.
  const balanceOf = (bal, asset) => {
    const b = (bal.info.balances || []).find((x) => x.asset === asset);
    check(b !== undefined, `no ${asset} in ${json(bal.info)}`);
    return b;
  };
  await step('F: fetchBalanceWs (account.status) is exact', async () => {
    const ba = await exA.fetchBalanceWs();
    eq(balanceOf(ba, 'BTC').free, '0.04995000', 'alice BTC free');  // 0.05 - 10 bps
    eq(balanceOf(ba, 'BTC').locked, '0.00000000', 'alice BTC locked');
    eq(balanceOf(ba, 'USDT').free, '98500.00000000', 'alice USDT free');  // every lock released
    eq(balanceOf(ba, 'USDT').locked, '0.00000000', 'alice USDT locked');
    const bb = await exB.fetchBalanceWs();
    eq(balanceOf(bb, 'BTC').free, '9.95000000', 'bob BTC free');
    eq(balanceOf(bb, 'USDT').free, '1498.50000000', 'bob USDT free');  // 1500 - 10 bps
    // The same figures as REST's fetchBalance.
    const rest = await exA.fetchBalance();
    eq(rest.BTC.free, 0.04995, 'alice BTC free over REST');
    eq(rest.USDT.free, 98500, 'alice USDT free over REST');
  });

  await step('G: errors map to ccxt exceptions and the connection goes on', async () => {
    await expectThrows(() => exA.createOrderWs(SYM, 'limit', 'buy', 10, 30000), ccxt.InsufficientFunds,
      'an order over the balance');
    await expectThrows(() => exA.fetchOrderWs('999999', SYM), ccxt.OrderNotFound, 'an unknown order');
    await expectThrows(() => exA.cancelOrderWs('999999', SYM), ccxt.OrderNotFound, 'cancel of an unknown order');
    const again = await exA.createOrderWs(SYM, 'limit', 'buy', 0.01, 27000);
    eq(again.status, 'open', 'an order after the errors');
    await exA.cancelOrderWs(again.id, SYM);
  });

  await exA.close();
  await exB.close();
}

runMain('ccxt_ws_api', () => withServer({ bin }, main), { timeoutMs: 110000 });

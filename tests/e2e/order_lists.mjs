// Iceberg orders and order lists (OCO) through the real ccxt client
// (ccxt.pro.binance 4.5.84, unmodified) against `matchbook serve`. ccxt has
// no unified order-list method: the OCO goes through its implicit API
// (privatePostOrderListOco, privateGetOrderList, privateDeleteOrderList,
// privateGetOpenOrderList), which signs and sends the parameters as given.
// Icebergs through createOrder: ccxt's unified `icebergAmount` and a raw
// `icebergQty` parameter both reach POST /api/v3/order as icebergQty.
//
// Usage: node order_lists.mjs <matchbook binary>   (or MATCHBOOK_BIN)
//
// Scenario on BTC/USDT:
//   alice 100000 USDT, bob 10 BTC
//   A  bob sells 0.01 @ 30000, alice market-buys it         -> last price 30000
//   B  bob: iceberg sell 0.05 @ 31000 showing 0.01 (icebergAmount): the book
//      shows 0.01; alice buys 0.015 @ 31000: the book shows 0.005 (the second
//      slice's rest); bob cancels it. A raw icebergQty works too.
//   C  bob: OCO sell 0.02: LIMIT_MAKER @ 32000 above, STOP_LOSS_LIMIT 29000
//      trigger 29500 below; watchOrders sees both orders (orderListId g);
//      GET orderList / openOrderList; DELETE orderList cancels both.
//   D  a second OCO; alice bids 0.1 @ 29400, bob sells 0.01 @ 29400: the stop
//      triggers (the LIMIT_MAKER is canceled) and the list is ALL_DONE.
import {
  Admin, binaryFromArgs, ccxt, check, deepEq, eq, expectOk, expectThrows, fail, json, makeCcxt,
  makeTrader, runMain, sleep, step, waitFor, watchLoop, withServer, withTimeout,
} from './lib.mjs';

const SYM = 'BTC/USDT';
const bin = binaryFromArgs();

function expectOrder(o, want, what) {
  for (const [k, v] of Object.entries(want)) {
    if (o[k] !== v) fail(`${what}: order.${k}: expected ${json(v)}, got ${json(o[k])}\n    order info: ${json(o.info)}`);
  }
}

async function main(srv) {
  const admin = new Admin(srv);
  const alice = await makeTrader(admin, srv, 'alice', { USDT: '100000' });
  const bob = await makeTrader(admin, srv, 'bob', { BTC: '10' });
  const exA = makeCcxt(srv, { apiKey: alice.apiKey, secret: alice.secret });
  const exB = makeCcxt(srv, { apiKey: bob.apiKey, secret: bob.secret });
  const loops = [];
  try {
    await step('loadMarkets: icebergs and order lists allowed, their filters', async () => {
      const m = (await exB.loadMarkets())[SYM];
      eq(m.info.icebergAllowed, true, 'icebergAllowed');
      eq(m.info.ocoAllowed, true, 'ocoAllowed');
      eq(m.info.otoAllowed, true, 'otoAllowed');
      const f = Object.fromEntries(m.info.filters.map((x) => [x.filterType, x]));
      deepEq(f.ICEBERG_PARTS, { filterType: 'ICEBERG_PARTS', limit: 10 }, 'ICEBERG_PARTS filter');
      deepEq(f.MAX_NUM_ICEBERG_ORDERS, { filterType: 'MAX_NUM_ICEBERG_ORDERS', maxNumIcebergOrders: 100 }, 'MAX_NUM_ICEBERG_ORDERS filter');
      await exA.loadMarkets();
    });

    await step('user data: watchOrders subscribed before any order', async () => {
      await withTimeout(exB.authenticate({ type: 'spot' }), 5000, 'bob user data subscription');
      loops.push(watchLoop('watchOrders(bob)', () => exB.watchOrders(SYM)));
      await sleep(100);
    });

    await step('A: a last price of 30000', async () => {
      await exB.createOrder(SYM, 'limit', 'sell', 0.01, 30000);
      const buy = await exA.createOrder(SYM, 'market', 'buy', 0.01);
      expectOrder(buy, { status: 'closed', filled: 0.01 }, 'alice market buy');
    });

    await step('B: an iceberg shows one slice in the book', async () => {
      const ice = await exB.createOrder(SYM, 'limit', 'sell', 0.05, 31000, { icebergAmount: 0.01 });
      expectOrder(ice, { status: 'open', amount: 0.05, filled: 0 }, 'iceberg');
      eq(ice.info.icebergQty, '0.01000000', 'iceberg: icebergQty in the answer');
      let ob = await exB.fetchOrderBook(SYM);
      deepEq(ob.asks, [[31000, 0.01]], 'the book shows the visible slice only');
      const buy = await exA.createOrder(SYM, 'limit', 'buy', 0.015, 31000);
      expectOrder(buy, { status: 'closed', filled: 0.015 }, 'alice buys 0.015 against the iceberg');
      ob = await exB.fetchOrderBook(SYM);
      deepEq(ob.asks, [[31000, 0.005]], 'the refilled slice, partly taken');
      const o = await exB.fetchOrder(ice.id, SYM);
      expectOrder(o, { status: 'open', amount: 0.05, filled: 0.015, remaining: 0.035 }, 'fetchOrder: the whole iceberg');
      eq(o.info.icebergQty, '0.01000000', 'fetchOrder: icebergQty');
      const c = await exB.cancelOrder(ice.id, SYM);
      expectOrder(c, { status: 'canceled' }, 'cancel the iceberg');
      ob = await exB.fetchOrderBook(SYM);
      deepEq(ob.asks, [], 'the book after the cancel');
      // The raw parameter, as Binance names it.
      const raw = await exB.createOrder(SYM, 'limit', 'sell', 0.03, 33000, { icebergQty: '0.01' });
      eq(raw.info.icebergQty, '0.01000000', 'raw icebergQty');
      await exB.cancelOrder(raw.id, SYM);
      // ICEBERG_PARTS: 0.2 / 0.01 = 20 slices > 10.
      const e = await expectThrows(() => exB.createOrder(SYM, 'limit', 'sell', 0.2, 33000, { icebergAmount: 0.01 }),
        ccxt.BadRequest, 'iceberg of 20 parts');
      check(e.message.includes('Filter failure: ICEBERG_PARTS'), `error message: ${e.message}`);
    });

    const oco = (cid) => exB.privatePostOrderListOco({
      symbol: 'BTCUSDT', side: 'SELL', quantity: '0.02', listClientOrderId: cid,
      aboveType: 'LIMIT_MAKER', abovePrice: '32000',
      belowType: 'STOP_LOSS_LIMIT', belowPrice: '29000', belowStopPrice: '29500', belowTimeInForce: 'GTC',
    });

    await step('C: an OCO placed, read back and canceled', async () => {
      const r = await oco('my-oco-1');
      eq(r.contingencyType, 'OCO', 'contingencyType');
      eq(r.listStatusType, 'EXEC_STARTED', 'listStatusType');
      eq(r.listOrderStatus, 'EXECUTING', 'listOrderStatus');
      eq(r.listClientOrderId, 'my-oco-1', 'listClientOrderId');
      eq(r.orders.length, 2, 'two orders');
      deepEq(r.orderReports.map((x) => [x.type, x.status, x.orderListId]),
        [['LIMIT_MAKER', 'NEW', r.orderListId], ['STOP_LOSS_LIMIT', 'NEW', r.orderListId]], 'orderReports [type, status, orderListId]');
      const ids = r.orders.map((x) => String(x.orderId));
      const ob = await exB.fetchOrderBook(SYM);
      deepEq(ob.asks, [[32000, 0.02]], 'the LIMIT_MAKER rests, the stop waits');
      // watchOrders: both orders, through executionReports carrying g.
      await waitFor(() => {
        const h = exB.orders && exB.orders.hashmap && exB.orders.hashmap[SYM];
        return h && ids.every((id) => h[id] && h[id].status === 'open');
      }, { timeout: 5000, what: 'watchOrders to show both OCO orders open' });
      const reps = exB.e2e.execReports.filter((x) => ids.includes(String(x.i)));
      check(reps.length >= 2 && reps.every((x) => x.g === r.orderListId), `executionReports carry g: ${json(reps)}`);
      const got = await exB.privateGetOrderList({ orderListId: r.orderListId });
      eq(got.listClientOrderId, 'my-oco-1', 'GET orderList by id');
      const byCid = await exB.privateGetOrderList({ origClientOrderId: 'my-oco-1' });
      eq(byCid.orderListId, r.orderListId, 'GET orderList by list client id');
      const open = await exB.privateGetOpenOrderList();
      deepEq(open.map((x) => x.orderListId), [r.orderListId], 'openOrderList');
      const fo = await exB.fetchOrder(ids[1], SYM);
      expectOrder(fo, { status: 'open', triggerPrice: 29500 }, 'fetchOrder of the OCO stop');
      eq(fo.info.orderListId, r.orderListId, 'fetchOrder: orderListId');
      const c = await exB.privateDeleteOrderList({ symbol: 'BTCUSDT', orderListId: r.orderListId });
      eq(c.listStatusType, 'ALL_DONE', 'cancel: listStatusType');
      eq(c.listOrderStatus, 'ALL_DONE', 'cancel: listOrderStatus');
      deepEq(c.orderReports.map((x) => x.status), ['CANCELED', 'CANCELED'], 'cancel: both orders canceled');
      deepEq(await exB.privateGetOpenOrderList(), [], 'no open list after the cancel');
      deepEq((await exB.fetchOpenOrders(SYM)).map((x) => x.id), [], 'no open order after the cancel');
      const all = await exB.privateGetAllOrderList();
      deepEq(all.map((x) => [x.orderListId, x.listStatusType]), [[r.orderListId, 'ALL_DONE']], 'allOrderList');
      const e = await expectThrows(() => exB.privateDeleteOrderList({ symbol: 'BTCUSDT', orderListId: r.orderListId }),
        ccxt.ExchangeError, 'cancel of a list that is done');
      check(e.message.includes('-2011'), `error: ${e.message}`);
    });

    await step('D: the stop of an OCO triggers and cancels the LIMIT_MAKER', async () => {
      const r = await oco('my-oco-2');
      const ids = r.orders.map((x) => String(x.orderId));
      await exA.createOrder(SYM, 'limit', 'buy', 0.1, 29400);
      const through = await exB.createOrder(SYM, 'limit', 'sell', 0.01, 29400);
      expectOrder(through, { status: 'closed', filled: 0.01 }, 'bob sells through the stop');
      await waitFor(async () => (await exB.privateGetOrderList({ orderListId: r.orderListId })).listStatusType === 'ALL_DONE',
        { timeout: 5000, what: 'the list to be done' });
      const maker = await exB.fetchOrder(ids[0], SYM);
      expectOrder(maker, { status: 'canceled' }, 'the LIMIT_MAKER');
      const stop = await exB.fetchOrder(ids[1], SYM);
      expectOrder(stop, { status: 'closed', filled: 0.02 }, 'the triggered stop');
      await waitFor(() => {
        const h = exB.orders && exB.orders.hashmap && exB.orders.hashmap[SYM];
        return h && h[ids[0]] && h[ids[0]].status === 'canceled' && h[ids[1]] && h[ids[1]].status === 'closed';
      }, { timeout: 5000, what: 'watchOrders: LIMIT_MAKER canceled, stop filled' });
      for (const l of loops) l.check();
    });
  } finally {
    for (const l of loops) l.stop();
    await withTimeout(Promise.allSettled([exA.close(), exB.close()]), 5000, 'closing the ccxt clients').catch(() => {});
    await sleep(50);
  }
  expectOk(await admin.request('GET', '/health'), 'admin health at the end');
}

runMain('order_lists', () => withServer({ bin }, main), { timeoutMs: 90000 });

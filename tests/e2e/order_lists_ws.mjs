// OTO and OTOCO order lists through the real ccxt client's implicit API
// (ccxt.pro.binance 4.5.84, unmodified: privatePostOrderListOto,
// privatePostOrderListOtoco, privateGetOrderList, privateDeleteOrderList), and
// every order-list method of the WebSocket API (/ws-api/v3: orderList.place.oco,
// orderList.place.oto, orderList.place.otoco, orderList.status,
// orderList.cancel, openOrderLists.status, allOrderLists), against
// `matchbook serve`. The user data stream (userDataStream.subscribe.signature
// on the WebSocket API) is checked for Binance's listStatus events.
//
// Usage: node order_lists_ws.mjs <matchbook binary>   (or MATCHBOOK_BIN)
//
// Scenario on BTC/USDT (10 bps maker and taker):
//   alice 100000 USDT (her WebSocket API connection also carries her user
//   data), bob 10 BTC and 100000 USDT (ccxt)
//   A  alice OTO (REST): buy 0.02 @ 30000, then sell 0.015 @ 31000
//      (LIMIT_MAKER): PENDING_NEW until bob's sells fill the buy completely,
//      then NEW in the book; bob's answer is his own order; the list canceled
//      by listClientOrderId
//   B  alice OTOCO (REST): buy 0.02 @ 30000, then sell 0.015 at 32000
//      (LIMIT_MAKER) or on a fall to 28500; bob fills the buy, then buys at
//      32000: the take-profit fills, the stop is canceled, ALL_DONE
//   C  alice OCO (WS API): status by id and by list client id, open lists,
//      canceled by id
//   D  alice OTO (WS API): the pending order PENDING_NEW, canceled by list
//      client id
//   E  alice OTOCO (WS API): bob fills the working order, the pair is placed,
//      the list canceled: the pair CANCELED, the working order FILLED
//   F  refusals over the WS API (-2013, -2011, -2010, -1158), allOrderLists;
//      every list started and ended once on the stream, list orders' reports
//      carry g
import {
  Admin, WsClient, binaryFromArgs, check, deepEq, eq, expectOk, fail, hmacHex, json, makeCcxt,
  makeTrader, runMain, sleep, step, waitFor, withServer, withTimeout,
} from './lib.mjs';

const SYM = 'BTC/USDT';
const STRIDE = 2 ** 50; // a list's k-th order id: the list id + k x 2^50 (docs/api.md)
const bin = binaryFromArgs();

// Binance's WebSocket API signature: every parameter but the signature,
// sorted by name, k=v&k=v unencoded, HMAC-SHA256 hex.
function signed(trader, params) {
  const all = { ...params, apiKey: trader.apiKey, timestamp: Date.now() };
  const payload = Object.keys(all).sort().map((k) => `${k}=${all[k]}`).join('&');
  return { ...all, signature: hmacHex(trader.secret, payload) };
}

async function main(srv) {
  const admin = new Admin(srv);
  const alice = await makeTrader(admin, srv, 'alice', { USDT: '100000' });
  const bob = await makeTrader(admin, srv, 'bob', { BTC: '10', USDT: '100000' });
  const exA = makeCcxt(srv, { apiKey: alice.apiKey, secret: alice.secret });
  const exB = makeCcxt(srv, { apiKey: bob.apiKey, secret: bob.secret });
  const ws = await WsClient.connect(`${srv.wsBase}/ws-api/v3`);
  // A WS API call of alice's: its result, or a failure naming the error.
  const call = async (method, params) => {
    const a = await ws.request(method, signed(alice, params));
    if (a.status !== 200) fail(`${method} ${json(params)}: ${json(a)}`);
    return a.result;
  };
  // A WS API call of alice's that must be refused with `code`: its message.
  const refused = async (method, params, code) => {
    const a = await ws.request(method, signed(alice, params));
    if (!a.error || a.error.code !== code) fail(`${method} ${json(params)}: expected error ${code}, got ${json(a)}`);
    return a.error.msg;
  };
  // The user data events of alice's subscription, in arrival order.
  const events = () => ws.messages.filter((m) => m.subscriptionId !== undefined && m.event).map((m) => m.event);
  const listEvents = (id) => events().filter((e) => e.e === 'listStatus' && e.g === id);
  const awaitList = (id, status) => waitFor(() => listEvents(id).some((e) => e.l === status),
    { timeout: 5000, what: `listStatus ${status} of list ${id}`, describe: () => json(listEvents(id)) });
  const order = async (id) => exA.privateGetOrder({ symbol: 'BTCUSDT', orderId: id });
  const asks = async () => (await exB.fetchOrderBook(SYM)).asks;
  const lists = [];
  try {
    await exA.loadMarkets();
    await exB.loadMarkets();

    await step('user data: alice subscribes on her WebSocket API connection', async () => {
      const r = await call('userDataStream.subscribe.signature', {});
      check(Number.isInteger(r.subscriptionId), `subscriptionId: ${json(r)}`);
    });

    await step('A: OTO through ccxt; the pending order waits for the whole fill', async () => {
      const r = await exA.privatePostOrderListOto({
        symbol: 'BTCUSDT', listClientOrderId: 'alice-oto',
        workingType: 'LIMIT', workingSide: 'BUY', workingPrice: '30000', workingQuantity: '0.02',
        workingTimeInForce: 'GTC', workingClientOrderId: 'alice-work',
        pendingType: 'LIMIT_MAKER', pendingSide: 'SELL', pendingPrice: '31000', pendingQuantity: '0.015',
        pendingClientOrderId: 'alice-pend',
      });
      lists.push(r.orderListId);
      eq(r.contingencyType, 'OTO', 'contingencyType');
      eq(r.listStatusType, 'EXEC_STARTED', 'listStatusType');
      eq(r.listOrderStatus, 'EXECUTING', 'listOrderStatus');
      eq(r.listClientOrderId, 'alice-oto', 'listClientOrderId');
      deepEq(r.orders.map((o) => [o.orderId, o.clientOrderId]),
        [[r.orderListId, 'alice-work'], [r.orderListId + STRIDE, 'alice-pend']], 'orders [orderId, clientOrderId]');
      deepEq(r.orderReports.map((o) => [o.type, o.side, o.status, o.orderListId]),
        [['LIMIT', 'BUY', 'NEW', r.orderListId], ['LIMIT_MAKER', 'SELL', 'PENDING_NEW', r.orderListId]],
        'orderReports [type, side, status, orderListId]');
      const open = await exA.fetchOpenOrders(SYM);
      deepEq(open.map((o) => [o.clientOrderId, o.info.status]).sort(),
        [['alice-pend', 'PENDING_NEW'], ['alice-work', 'NEW']], 'fetchOpenOrders: the pending order is open, PENDING_NEW');
      deepEq(await asks(), [], 'the pending sell is in no book');
      // Half the buy fills: still pending.
      await exB.createOrder(SYM, 'limit', 'sell', 0.01, 30000);
      eq((await order(r.orderListId + STRIDE)).status, 'PENDING_NEW', 'the pending order after a partial fill');
      eq((await order(r.orderListId)).status, 'PARTIALLY_FILLED', 'the working order after a partial fill');
      // The rest: the pending order is placed. Bob's answer is his order's.
      const b = await exB.createOrder(SYM, 'limit', 'sell', 0.01, 30000, { newClientOrderId: 'bob-a2' });
      eq(b.clientOrderId, 'bob-a2', "bob's answer: his client order id");
      eq(b.info.orderListId, -1, "bob's answer: orderListId");
      eq(b.amount, 0.01, "bob's answer: amount");
      eq(b.price, 30000, "bob's answer: price");
      eq(b.status, 'closed', "bob's answer: status");
      eq((await order(r.orderListId)).status, 'FILLED', 'the working order');
      eq((await order(r.orderListId + STRIDE)).status, 'NEW', 'the pending order once placed');
      deepEq(await asks(), [[31000, 0.015]], 'the placed order rests');
      const got = await exA.privateGetOrderList({ origClientOrderId: 'alice-oto' });
      eq(got.listOrderStatus, 'EXECUTING', 'the list while its placed order is open');
      // The stream: PENDING_NEW at placement, NEW once placed.
      await waitFor(() => events().some((e) => e.e === 'executionReport' && e.i === r.orderListId + STRIDE && e.X === 'NEW'),
        { timeout: 5000, what: 'the executionReport of the placed order' });
      const pend = events().filter((e) => e.e === 'executionReport' && e.i === r.orderListId + STRIDE).map((e) => [e.x, e.X]);
      deepEq(pend, [['NEW', 'PENDING_NEW'], ['NEW', 'NEW']], 'executionReports of the pending order [x, X]');
      const c = await exA.privateDeleteOrderList({ symbol: 'BTCUSDT', listClientOrderId: 'alice-oto' });
      eq(c.listOrderStatus, 'ALL_DONE', 'cancel: listOrderStatus');
      eq((await order(r.orderListId + STRIDE)).status, 'CANCELED', 'the placed order after the cancel');
      deepEq(await asks(), [], 'the book after the cancel');
      await awaitList(r.orderListId, 'ALL_DONE');
    });

    await step('B: OTOCO through ccxt; the take-profit fills, the stop is canceled', async () => {
      const r = await exA.privatePostOrderListOtoco({
        symbol: 'BTCUSDT', listClientOrderId: 'alice-otoco',
        workingType: 'LIMIT', workingSide: 'BUY', workingPrice: '30000', workingQuantity: '0.02',
        workingTimeInForce: 'GTC', pendingSide: 'SELL', pendingQuantity: '0.015',
        pendingAboveType: 'LIMIT_MAKER', pendingAbovePrice: '32000',
        pendingBelowType: 'STOP_LOSS_LIMIT', pendingBelowPrice: '28000', pendingBelowStopPrice: '28500',
        pendingBelowTimeInForce: 'GTC', newOrderRespType: 'RESULT',
      });
      lists.push(r.orderListId);
      eq(r.contingencyType, 'OTO', 'contingencyType');
      deepEq(r.orders.map((o) => o.orderId), [0, 1, 2].map((k) => r.orderListId + k * STRIDE), 'order ids');
      deepEq(r.orderReports.map((o) => [o.type, o.status]),
        [['LIMIT', 'NEW'], ['LIMIT_MAKER', 'PENDING_NEW'], ['STOP_LOSS_LIMIT', 'PENDING_NEW']], 'orderReports [type, status]');
      const b = await exB.createOrder(SYM, 'limit', 'sell', 0.02, 30000, { newClientOrderId: 'bob-b1' });
      eq(b.clientOrderId, 'bob-b1', "bob's answer: his client order id");
      eq(b.amount, 0.02, "bob's answer: amount");
      deepEq([(await order(r.orderListId + STRIDE)).status, (await order(r.orderListId + 2 * STRIDE)).status],
        ['NEW', 'NEW'], 'the pair once placed');
      deepEq(await asks(), [[32000, 0.015]], 'the take-profit rests, the stop waits');
      await exB.createOrder(SYM, 'limit', 'buy', 0.015, 32000);
      const tp = await exA.fetchOrder(String(r.orderListId + STRIDE), SYM);
      eq(tp.status, 'closed', 'the take-profit');
      const sl = await exA.fetchOrder(String(r.orderListId + 2 * STRIDE), SYM);
      eq(sl.status, 'canceled', 'the stop');
      eq((await exA.privateGetOrderList({ orderListId: r.orderListId })).listStatusType, 'ALL_DONE', 'the list');
      deepEq(await exA.privateGetOpenOrderList(), [], 'no open list');
      await awaitList(r.orderListId, 'ALL_DONE');
    });

    await step('C: OCO over the WebSocket API: status, open lists, cancel by id', async () => {
      const r = await call('orderList.place.oco', {
        symbol: 'BTCUSDT', side: 'SELL', quantity: '0.01', listClientOrderId: 'ws-oco',
        aboveType: 'LIMIT_MAKER', abovePrice: '35000', belowType: 'STOP_LOSS', belowStopPrice: '25000',
      });
      lists.push(r.orderListId);
      eq(r.contingencyType, 'OCO', 'contingencyType');
      eq(r.listOrderStatus, 'EXECUTING', 'listOrderStatus');
      deepEq(r.orderReports.map((o) => [o.type, o.status]), [['LIMIT_MAKER', 'NEW'], ['STOP_LOSS', 'NEW']], 'orderReports');
      const byId = await call('orderList.status', { orderListId: r.orderListId });
      const byCid = await call('orderList.status', { origClientOrderId: 'ws-oco' });
      deepEq(byCid, byId, 'orderList.status by list client id and by id');
      eq(byId.listClientOrderId, 'ws-oco', 'orderList.status: listClientOrderId');
      check(!('orderReports' in byId), `orderList.status has no orderReports: ${json(byId)}`);
      deepEq((await call('openOrderLists.status', {})).map((l) => l.orderListId), [r.orderListId], 'openOrderLists.status');
      const c = await call('orderList.cancel', { symbol: 'BTCUSDT', orderListId: r.orderListId, newClientOrderId: 'ws-cxl' });
      eq(c.listStatusType, 'ALL_DONE', 'orderList.cancel: listStatusType');
      deepEq(c.orderReports.map((o) => [o.orderId, o.status, o.clientOrderId]),
        [[r.orderListId, 'CANCELED', 'ws-cxl'], [r.orderListId + STRIDE, 'CANCELED', 'ws-cxl']], 'orderList.cancel: orderReports');
      deepEq(await call('openOrderLists.status', {}), [], 'openOrderLists.status after the cancel');
      await awaitList(r.orderListId, 'ALL_DONE');
    });

    await step('D: OTO over the WebSocket API, canceled by list client id', async () => {
      const r = await call('orderList.place.oto', {
        symbol: 'BTCUSDT', listClientOrderId: 'ws-oto',
        workingType: 'LIMIT_MAKER', workingSide: 'SELL', workingPrice: '36000', workingQuantity: '0.01',
        pendingType: 'LIMIT', pendingSide: 'BUY', pendingPrice: '29000', pendingQuantity: '0.01', pendingTimeInForce: 'GTC',
      });
      lists.push(r.orderListId);
      deepEq(r.orderReports.map((o) => o.status), ['NEW', 'PENDING_NEW'], 'orderReports statuses');
      const st = await call('order.status', { symbol: 'BTCUSDT', orderId: r.orderListId + STRIDE });
      eq(st.status, 'PENDING_NEW', 'order.status of the pending order');
      eq(st.orderListId, r.orderListId, 'order.status: orderListId');
      const c = await call('orderList.cancel', { symbol: 'BTCUSDT', listClientOrderId: 'ws-oto' });
      eq(c.orderListId, r.orderListId, 'orderList.cancel: orderListId');
      deepEq(c.orderReports.map((o) => o.status), ['CANCELED', 'CANCELED'], 'orderList.cancel: both canceled');
      await awaitList(r.orderListId, 'ALL_DONE');
    });

    await step('E: OTOCO over the WebSocket API; the placed pair canceled with the list', async () => {
      const r = await call('orderList.place.otoco', {
        symbol: 'BTCUSDT', listClientOrderId: 'ws-otoco',
        workingType: 'LIMIT', workingSide: 'BUY', workingPrice: '29500', workingQuantity: '0.01', workingTimeInForce: 'GTC',
        pendingSide: 'SELL', pendingQuantity: '0.009',
        pendingAboveType: 'TAKE_PROFIT_LIMIT', pendingAbovePrice: '33500', pendingAboveStopPrice: '33000',
        pendingAboveTimeInForce: 'GTC',
        pendingBelowType: 'STOP_LOSS', pendingBelowStopPrice: '27000',
      });
      lists.push(r.orderListId);
      deepEq(r.orderReports.map((o) => [o.type, o.status]),
        [['LIMIT', 'NEW'], ['TAKE_PROFIT_LIMIT', 'PENDING_NEW'], ['STOP_LOSS', 'PENDING_NEW']], 'orderReports');
      await exB.createOrder(SYM, 'limit', 'sell', 0.01, 29500);
      const open = await call('openOrders.status', { symbol: 'BTCUSDT' });
      deepEq(open.map((o) => [o.orderId, o.status]).sort((x, y) => x[0] - y[0]),
        [[r.orderListId + STRIDE, 'NEW'], [r.orderListId + 2 * STRIDE, 'NEW']], 'openOrders.status: the pair placed');
      const c = await call('orderList.cancel', { symbol: 'BTCUSDT', orderListId: r.orderListId });
      eq(c.listOrderStatus, 'ALL_DONE', 'orderList.cancel: listOrderStatus');
      deepEq(c.orderReports.filter((o) => o.orderId !== r.orderListId).map((o) => [o.orderId, o.status]),
        [[r.orderListId + STRIDE, 'CANCELED'], [r.orderListId + 2 * STRIDE, 'CANCELED']],
        'orderList.cancel: the pair canceled');
      eq((await call('order.status', { symbol: 'BTCUSDT', orderId: r.orderListId })).status, 'FILLED', 'the working order');
      deepEq(await call('openOrders.status', { symbol: 'BTCUSDT' }), [], 'no open order');
      await awaitList(r.orderListId, 'ALL_DONE');
    });

    await step('F: refusals, allOrderLists and the listStatus events', async () => {
      eq(await refused('orderList.status', { orderListId: 987654321 }, -2013), 'Order list does not exist.', '-2013 message');
      eq(await refused('orderList.cancel', { symbol: 'BTCUSDT', orderListId: 987654321 }, -2011), 'Order list does not exist.', '-2011 message');
      eq(await refused('orderList.place.oco', {
        symbol: 'BTCUSDT', side: 'SELL', quantity: '0.01', aboveType: 'LIMIT_MAKER', abovePrice: '30000',
        belowType: 'STOP_LOSS', belowStopPrice: '31000',
      }, -2010), 'The relationship of the prices for the orders is not correct.', '-2010 message');
      eq(await refused('orderList.place.oto', {
        symbol: 'BTCUSDT', workingType: 'MARKET', workingSide: 'BUY', workingQuantity: '0.01',
        pendingType: 'LIMIT', pendingSide: 'SELL', pendingPrice: '31000', pendingQuantity: '0.01', pendingTimeInForce: 'GTC',
      }, -1158), 'Order type not supported in OTO.', '-1158 message');
      deepEq(await call('openOrderLists.status', {}), [], 'the refusals placed nothing');
      const all = await call('allOrderLists', {});
      deepEq(all.map((l) => [l.orderListId, l.listStatusType]), lists.map((id) => [id, 'ALL_DONE']), 'allOrderLists');
      const limited = await call('allOrderLists', { fromId: lists[2], limit: 2 });
      deepEq(limited.map((l) => l.orderListId), lists.slice(2, 4), 'allOrderLists fromId, limit');
      // Each list: EXEC_STARTED once, then ALL_DONE once, on the stream.
      for (const id of lists) {
        const seq = listEvents(id).map((e) => [e.l, e.L]);
        deepEq(seq, [['EXEC_STARTED', 'EXECUTING'], ['ALL_DONE', 'ALL_DONE']], `listStatus events of list ${id}`);
      }
      const oto = listEvents(lists[0])[0];
      eq(oto.c, 'OTO', 'listStatus c');
      eq(oto.C, 'alice-oto', 'listStatus C');
      eq(oto.r, 'NONE', 'listStatus r');
      deepEq(oto.O, [{ s: 'BTCUSDT', i: lists[0], c: 'alice-work' }, { s: 'BTCUSDT', i: lists[0] + STRIDE, c: 'alice-pend' }], 'listStatus O');
      // Every executionReport of a list order carries its list id in g.
      const ids = new Map();
      for (const id of lists) for (let k = 0; k < 3; k++) ids.set(id + k * STRIDE, id);
      const reports = events().filter((e) => e.e === 'executionReport' && ids.has(e.i));
      check(reports.length >= 15, `executionReports of list orders: ${reports.length}`);
      for (const e of reports) eq(e.g, ids.get(e.i), `executionReport g of order ${e.i}`);
      // A list's EXEC_STARTED precedes its orders' reports.
      const ev = events();
      for (const id of lists) {
        const started = ev.findIndex((e) => e.e === 'listStatus' && e.g === id);
        const first = ev.findIndex((e) => e.e === 'executionReport' && e.g === id);
        check(started >= 0 && started < first, `list ${id}: EXEC_STARTED at ${started}, its first report at ${first}`);
      }
    });
  } finally {
    ws.close();
    await withTimeout(Promise.allSettled([exA.close(), exB.close()]), 5000, 'closing the ccxt clients').catch(() => {});
    await sleep(50);
  }
  expectOk(await admin.request('GET', '/health'), 'admin health at the end');
}

runMain('order_lists_ws', () => withServer({ bin }, main), { timeoutMs: 60000 });

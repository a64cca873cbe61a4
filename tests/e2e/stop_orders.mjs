// Conditional orders (STOP_LOSS, STOP_LOSS_LIMIT, TAKE_PROFIT,
// TAKE_PROFIT_LIMIT, trailing stops) through the real ccxt client
// (ccxt.pro.binance 4.5.84, unmodified) against `matchbook serve`: the
// market's order types and filters, ccxt's unified stop-loss / take-profit /
// trailing parameters, the orders read back with their trigger price, a
// cancel, a trade through a stop that triggers it and fills it (seen by
// watchOrders), and a stop on the wrong side of the last price refused as
// ccxt's InvalidOrder. Values are asserted on ccxt's unified fields.
//
// Usage: node stop_orders.mjs <matchbook binary>   (or MATCHBOOK_BIN)
//
// Scenario on BTC/USDT (10 bps fees; the seller pays in USDT):
//   alice 100000 USDT, bob 10 BTC
//   A  bob sells 0.01 @ 30000, alice market-buys it      -> last price 30000
//   B  bob: stop-loss limit sell 0.05 @ 29000, trigger 29500   (waits)
//      bob: take-profit limit sell 0.02 @ 32000, trigger 31000 (waits)
//      bob: trailing stop-loss market sell 0.01, 1 %          (waits)
//   C  bob cancels the take-profit and the trailing stop
//   D  bob: stop-loss limit sell triggered at 31000 (>= 30000) -> refused
//   E  alice bids 0.1 @ 29400; bob sells 0.01 @ 29400: 29400 <= 29500, the
//      stop triggers and sells its 0.05 at 29400 -> filled
import {
  Admin, binaryFromArgs, ccxt, check, deepEq, eq, expectOk, expectThrows, fail, json, makeCcxt,
  makeTrader, num, runMain, sleep, step, units, waitFor, watchLoop, withServer, withTimeout,
} from './lib.mjs';

const SYM = 'BTC/USDT';
const bin = binaryFromArgs();

// Order fields as ccxt unifies them.
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
  const ids = {};
  try {
    await step('loadMarkets: the conditional order types and their filters', async () => {
      const markets = await exB.loadMarkets();
      const m = markets[SYM];
      check(m && m.spot && m.active, `${SYM} missing or inactive: ${json(m && m.info)}`);
      deepEq(m.info.orderTypes, ['LIMIT', 'LIMIT_MAKER', 'MARKET', 'STOP_LOSS', 'STOP_LOSS_LIMIT', 'TAKE_PROFIT', 'TAKE_PROFIT_LIMIT'], 'BTCUSDT orderTypes');
      eq(m.info.allowTrailingStop, true, 'allowTrailingStop');
      eq(m.info.pegInstructionsAllowed, false, 'pegInstructionsAllowed');
      const f = Object.fromEntries(m.info.filters.map((x) => [x.filterType, x]));
      deepEq(f.TRAILING_DELTA, { filterType: 'TRAILING_DELTA', minTrailingAboveDelta: 10, maxTrailingAboveDelta: 2000, minTrailingBelowDelta: 10, maxTrailingBelowDelta: 2000 }, 'TRAILING_DELTA filter');
      deepEq(f.MAX_NUM_ALGO_ORDERS, { filterType: 'MAX_NUM_ALGO_ORDERS', maxNumAlgoOrders: 5 }, 'MAX_NUM_ALGO_ORDERS filter');
      await exA.loadMarkets();
    });

    await step('user data: watchOrders subscribed before any order', async () => {
      await withTimeout(exB.authenticate({ type: 'spot' }), 5000, 'bob user data subscription');
      loops.push(watchLoop('watchOrders(bob)', () => exB.watchOrders(SYM)));
      await sleep(100);
      for (const l of loops) l.check();
    });

    await step('A: a last price of 30000', async () => {
      const ask = await exB.createOrder(SYM, 'limit', 'sell', 0.01, 30000);
      expectOrder(ask, { status: 'open', type: 'limit' }, 'bob ask');
      const buy = await exA.createOrder(SYM, 'market', 'buy', 0.01);
      expectOrder(buy, { status: 'closed', filled: 0.01, average: 30000 }, 'alice market buy');
    });

    await step('B: stop-loss limit, take-profit limit and trailing stop orders', async () => {
      // The unified trigger price of a limit order: STOP_LOSS_LIMIT.
      const sl = await exB.createOrder(SYM, 'limit', 'sell', 0.05, 29000, { triggerPrice: 29500 });
      eq(sl.info.type, 'STOP_LOSS_LIMIT', 'stop-loss limit: Binance type');
      expectOrder(sl, { status: 'open', type: 'limit', side: 'sell', price: 29000, amount: 0.05, filled: 0, triggerPrice: 29500, timeInForce: 'GTC' }, 'stop-loss limit');
      eq(sl.info.workingTime, -1, 'stop-loss limit: workingTime while it waits');
      ids.sl = sl.id;

      const tp = await exB.createOrder(SYM, 'limit', 'sell', 0.02, 32000, { takeProfitPrice: 31000 });
      eq(tp.info.type, 'TAKE_PROFIT_LIMIT', 'take-profit limit: Binance type');
      expectOrder(tp, { status: 'open', type: 'limit', side: 'sell', price: 32000, amount: 0.02, triggerPrice: 31000 }, 'take-profit limit');
      ids.tp = tp.id;

      // A trailing stop: 1 % (trailingDelta 100 basis points), tracking from
      // now (no activation price).
      const tr = await exB.createOrder(SYM, 'market', 'sell', 0.01, undefined, { trailingPercent: 1, stopLossOrTakeProfit: 'stopLoss' });
      eq(tr.info.type, 'STOP_LOSS', 'trailing stop: Binance type');
      eq(tr.info.trailingDelta, 100, 'trailing stop: trailingDelta');
      check(tr.info.trailingTime > 0, `trailing stop: trailingTime ${tr.info.trailingTime} (it tracks from its placement)`);
      expectOrder(tr, { status: 'open', type: 'market', side: 'sell', amount: 0.01 }, 'trailing stop');
      ids.tr = tr.id;

      // Nothing of them is in the book.
      const ob = await exB.fetchOrderBook(SYM);
      deepEq([ob.bids, ob.asks], [[], []], 'the book while the stops wait');
      // The sells lock their quantity.
      const bal = await exB.fetchBalance();
      deepEq([bal.BTC.free, bal.BTC.used], [num(units('9.91')), num(units('0.08'))], 'bob BTC [free, used]');
    });

    await step('fetchOrder / fetchOpenOrders: the trigger prices', async () => {
      const o = await exB.fetchOrder(ids.sl, SYM);
      expectOrder(o, { id: ids.sl, status: 'open', type: 'limit', price: 29000, amount: 0.05, triggerPrice: 29500 }, 'fetchOrder stop-loss limit');
      eq(o.info.isWorking, false, 'fetchOrder: isWorking while it waits');
      eq(o.info.workingTime, -1, 'fetchOrder: workingTime while it waits');
      eq(o.info.stopPrice, '29500.00000000', 'fetchOrder: stopPrice');
      const open = await exB.fetchOpenOrders(SYM);
      deepEq(open.map((x) => [x.id, x.triggerPrice, x.info.type]).sort(),
        [[ids.sl, 29500, 'STOP_LOSS_LIMIT'], [ids.tp, 31000, 'TAKE_PROFIT_LIMIT'], [ids.tr, undefined, 'STOP_LOSS']].sort(), 'fetchOpenOrders [id, triggerPrice, type]');
    });

    await step('C: cancelOrder of a waiting take-profit and of the trailing stop', async () => {
      const c = await exB.cancelOrder(ids.tp, SYM);
      expectOrder(c, { id: ids.tp, status: 'canceled', triggerPrice: 31000 }, 'cancelOrder take-profit');
      const t = await exB.cancelOrder(ids.tr, SYM);
      expectOrder(t, { id: ids.tr, status: 'canceled' }, 'cancelOrder trailing stop');
      const open = await exB.fetchOpenOrders(SYM);
      deepEq(open.map((x) => x.id), [ids.sl], 'fetchOpenOrders after the cancels');
      const canceled = await exB.fetchOrder(ids.tp, SYM);
      expectOrder(canceled, { status: 'canceled', triggerPrice: 31000 }, 'fetchOrder of the canceled take-profit');
      eq(canceled.info.workingTime, -1, 'the canceled take-profit never worked');
    });

    await step('D: a stop the last price already meets: InvalidOrder', async () => {
      const e = await expectThrows(() => exB.createOrder(SYM, 'limit', 'sell', 0.01, 29000, { triggerPrice: 31000 }),
        ccxt.InvalidOrder, 'stop-loss sell triggered at 31000 with the last price at 30000');
      check(e.message.includes('Order would trigger immediately.'), `error message: ${e.message}`);
      check(e instanceof ccxt.OrderImmediatelyFillable, `expected ccxt's OrderImmediatelyFillable (an InvalidOrder), got ${e.constructor.name}`);
      // A trailing delta outside the TRAILING_DELTA filter: -1013, which
      // ccxt maps to BadRequest as it does every filter failure.
      const f = await expectThrows(() => exB.createOrder(SYM, 'market', 'sell', 0.01, undefined, { trailingPercent: 50, stopLossOrTakeProfit: 'stopLoss' }),
        ccxt.BadRequest, 'trailing stop of 50 % (5000 basis points)');
      check(f.message.includes('Filter failure: TRAILING_DELTA'), `error message: ${f.message}`);
    });

    await step('E: a trade through the stop triggers it and it fills (watchOrders sees it)', async () => {
      const bid = await exA.createOrder(SYM, 'limit', 'buy', 0.1, 29400);
      expectOrder(bid, { status: 'open' }, 'alice bid');
      const through = await exB.createOrder(SYM, 'limit', 'sell', 0.01, 29400);
      expectOrder(through, { status: 'closed', filled: 0.01 }, 'bob sells through the stop');
      await waitFor(async () => {
        const o = await exB.fetchOrder(ids.sl, SYM);
        return o.status === 'closed';
      }, { timeout: 5000, what: 'the triggered stop-loss limit to fill' });
      const o = await exB.fetchOrder(ids.sl, SYM);
      expectOrder(o, { status: 'closed', filled: 0.05, remaining: 0, average: 29400, cost: 1470, triggerPrice: 29500, type: 'limit' }, 'fetchOrder of the triggered stop-loss limit');
      eq(o.info.type, 'STOP_LOSS_LIMIT', 'the triggered order keeps its type');
      check(o.info.workingTime >= o.info.time, `workingTime ${o.info.workingTime}: the trigger time, not before its placing ${o.info.time}`);
      eq(o.info.workingTime, through.timestamp, 'workingTime: the time of the trade that triggered it');

      await waitFor(() => {
        const w = exB.orders && exB.orders.hashmap && exB.orders.hashmap[SYM] && exB.orders.hashmap[SYM][ids.sl];
        return w && w.status === 'closed' && w.filled === 0.05 && w.triggerPrice === 29500;
      }, {
        timeout: 5000,
        what: 'watchOrders to show the stop-loss limit closed, filled 0.05, trigger 29500',
        describe: () => {
          const w = exB.orders && exB.orders.hashmap && exB.orders.hashmap[SYM] && exB.orders.hashmap[SYM][ids.sl];
          return w ? json({ status: w.status, filled: w.filled, triggerPrice: w.triggerPrice, type: w.type }) : 'not in the cache';
        },
      });
      const reports = exB.e2e.execReports.filter((r) => String(r.i) === String(ids.sl));
      deepEq(reports.map((r) => [r.x, r.X, r.o, r.P]),
        [['NEW', 'NEW', 'STOP_LOSS_LIMIT', '29500.00000000'], ['NEW', 'NEW', 'STOP_LOSS_LIMIT', '29500.00000000'], ['TRADE', 'FILLED', 'STOP_LOSS_LIMIT', '29500.00000000']],
        'executionReports of the stop [x, X, o, P]: NEW when placed, NEW when triggered, TRADE');
      eq(reports[0].w, false, 'placed: not working');
      check(!('W' in reports[0]), `placed: no working time W yet: ${json(reports[0])}`);
      eq(reports[1].W, o.info.workingTime, 'triggered: W is the working time');

      // The history: both stops with their trigger prices.
      const all = await exB.fetchOrders(SYM);
      const byId = Object.fromEntries(all.map((x) => [x.id, x]));
      expectOrder(byId[ids.sl], { status: 'closed', triggerPrice: 29500 }, 'fetchOrders: the stop-loss limit');
      expectOrder(byId[ids.tp], { status: 'canceled', triggerPrice: 31000 }, 'fetchOrders: the take-profit limit');
      deepEq((await exB.fetchOpenOrders(SYM)).map((x) => x.id), [], 'no open orders left');

      // Bob sold 0.01 @ 30000, 0.01 and 0.05 @ 29400; 10 bps in USDT.
      const bal = await exB.fetchBalance();
      deepEq([bal.BTC.free, bal.BTC.used, bal.USDT.free], [num(units('9.93')), 0, num(units('2061.936'))], 'bob [BTC free, BTC used, USDT free]');
      for (const l of loops) l.check();
    });
  } finally {
    for (const l of loops) l.stop();
    await withTimeout(Promise.allSettled([exA.close(), exB.close()]), 5000, 'closing the ccxt clients').catch(() => {});
    await sleep(50);
  }
  expectOk(await admin.request('GET', '/health'), 'admin health at the end');
}

runMain('stop_orders', () => withServer({ bin }, main), { timeoutMs: 90000 });

// The trading page: a client of the public API like any other. Market data
// from exchangeInfo, the REST snapshots and one combined stream per market;
// orders and account data through signed REST calls (signed here, with
// WebCrypto) and the user-data stream of a listen key.

import { createChart, CandlestickSeries, HistogramSeries } from '/vendor/lightweight-charts.mjs';
import { ApiError, Signer, Stream, el, publicGet, timeText } from '/lib/api.js';
import { LocalBook } from '/lib/book.js';
import { fixed, format, mul, parse, placesOf } from '/lib/decimal.js';

const $ = (id) => document.getElementById(id);
const LEVELS = 20;
const STATUS_TEXT = { TRADING: 'TRADING', HALT: 'HALTED', BREAK: 'CANCEL ONLY', END_OF_DAY: 'CLOSED' };

const state = {
  markets: [],
  market: null,     // the exchangeInfo symbol shown
  interval: '1m',
  stream: null,
  book: null,
  trades: [],
  lastPrice: null,
  signer: null,
  userStream: null,
  listenKey: null,
  keepAlive: 0,
  balances: new Map(),  // asset -> {free, locked}
  open: new Map(),      // orderId -> order (every market)
  history: [],          // closed orders of the market shown, newest first
  fills: [],            // fills of the market shown, newest first
};

// Render budget (docs/web.md): each depth message's time from arrival to the
// frame that shows it, as performance measures "mb-depth".
const pendingDepth = [];
let bookFrame = 0;

// ---------------------------------------------------------------- helpers

function filter(m, type) {
  return m.filters.find((f) => f.filterType === type) || {};
}
function tickOf(m) { return filter(m, 'PRICE_FILTER').tickSize || '0.00000001'; }
function stepOf(m) { return filter(m, 'LOT_SIZE').stepSize || '0.00000001'; }
function pricePlaces() { return placesOf(tickOf(state.market)); }
function qtyPlaces() { return placesOf(stepOf(state.market)); }
function px(p) { return fixed(p, pricePlaces()); }
function qx(q) { return fixed(q, qtyPlaces()); }
function cmp(a, b) { return a > b ? 1 : a < b ? -1 : 0; }

function showError(node, err) {
  node.textContent = err ? (err instanceof ApiError ? err.message : String(err.message || err)) : '';
}

// ---------------------------------------------------------------- markets

async function loadMarkets() {
  const info = await publicGet('/api/v3/exchangeInfo');
  state.markets = info.symbols;
  const sel = $('market');
  sel.replaceChildren(...info.symbols.map((s) => el('option', { value: s.symbol }, `${s.baseAsset}/${s.quoteAsset}`)));
  const wanted = new URLSearchParams(location.search).get('symbol');
  const first = info.symbols.find((s) => s.symbol === wanted) || info.symbols[0];
  if (!first) throw new Error('The server lists no market.');
  sel.value = first.symbol;
  await selectMarket(first.symbol);
}

async function refreshStatus() {
  try {
    const info = await publicGet('/api/v3/exchangeInfo');
    state.markets = info.symbols;
    const m = info.symbols.find((s) => s.symbol === state.market.symbol);
    if (m) {
      state.market = m;
      renderStatus();
    }
  } catch {
    // the next poll tries again
  }
}

function renderStatus() {
  const s = state.market.status;
  const node = $('market-status');
  node.textContent = STATUS_TEXT[s] || s;
  node.className = `status ${s}`;
  // A market listed since the page loaded joins the list.
  const sel = $('market');
  for (const m of state.markets) {
    if (![...sel.options].some((o) => o.value === m.symbol)) {
      sel.append(el('option', { value: m.symbol }, `${m.baseAsset}/${m.quoteAsset}`));
    }
  }
  for (const opt of sel.options) {
    const m = state.markets.find((x) => x.symbol === opt.value);
    if (m) opt.textContent = `${m.baseAsset}/${m.quoteAsset}${m.status === 'TRADING' ? '' : ` (${STATUS_TEXT[m.status] || m.status})`}`;
  }
  updateForm();
}

async function selectMarket(symbol) {
  state.market = state.markets.find((s) => s.symbol === symbol);
  state.stream?.close();
  state.trades = [];
  state.lastPrice = null;
  state.lastDirection = null;
  state.history = [];
  state.fills = [];
  pendingCandles.clear();
  tradesDirty = true;
  renderStatus();
  const sym = symbol.toLowerCase();
  state.book = new LocalBook(symbol, {
    onChange: () => scheduleBook(),
    onResync: () => scheduleBook(),
  });
  state.stream = new Stream(`/stream?streams=${sym}@depth@0ms/${sym}@trade/${sym}@ticker/${sym}@kline_${state.interval}`, {
    onOpen: () => state.book.restart(),
    onMessage: onMarketMessage,
    onState: (s) => { $('conn').textContent = s === 'open' ? 'live' : 'reconnecting'; },
  });
  $('conn').textContent = 'connecting';
  scheduleBook();
  configureChart();
  await Promise.all([loadTrades(), loadTicker(), loadKlines()]);
  if (state.signer) await loadAccountViews();
  updateForm();
}

function onMarketMessage(msg) {
  if (!msg || !msg.stream || !msg.data) return;
  const d = msg.data;
  if (d.s && d.s !== state.market.symbol) return;
  if (d.e === 'depthUpdate') {
    // Measured in steady state only: a diff buffered while the snapshot
    // loads waits for it, by design.
    if (state.book.synced) pendingDepth.push(performance.now());
    state.book.onDiff(d);
  } else if (d.e === 'trade') {
    addTrade({ id: d.t, price: d.p, qty: d.q, time: d.T, isBuyerMaker: d.m });
  } else if (d.e === '24hrTicker') {
    renderTicker({ lastPrice: d.c, priceChangePercent: d.P, highPrice: d.h, lowPrice: d.l, volume: d.v });
  } else if (d.e === 'kline') {
    if (d.k.i !== state.interval) return;
    updateCandle(d.k.t, d.k.o, d.k.h, d.k.l, d.k.c, d.k.v);
  }
}

// ---------------------------------------------------------------- ticker, trades

// Whether an answer asked for `symbol` (and `interval`) is still wanted: the
// user may have switched while it was on its way.
function current(symbol, interval = state.interval) {
  return state.market.symbol === symbol && state.interval === interval;
}

async function loadTicker() {
  const symbol = state.market.symbol;
  try {
    const t = await publicGet('/api/v3/ticker/24hr', { symbol });
    if (current(symbol)) renderTicker(t);
  } catch {
    // shown on the next stream event
  }
}

function renderTicker(t) {
  $('t-last').textContent = px(t.lastPrice);
  let pct = t.priceChangePercent;
  if (pct === undefined && t.openPrice) {
    const o = Number(t.openPrice);
    pct = o ? (((Number(t.lastPrice) - o) / o) * 100).toFixed(2) : '0';
  }
  const change = $('t-change');
  change.textContent = `${Number(pct || 0).toFixed(2)}%`;
  change.className = Number(pct) > 0 ? 'buy' : Number(pct) < 0 ? 'sell' : '';
  $('t-high').textContent = px(t.highPrice);
  $('t-low').textContent = px(t.lowPrice);
  $('t-volume').textContent = qx(t.volume);
}

async function loadTrades() {
  const symbol = state.market.symbol;
  const trades = await publicGet('/api/v3/trades', { symbol, limit: 50 });
  if (!current(symbol)) return;
  state.trades = trades.map((t) => ({ id: t.id, price: t.price, qty: t.qty, time: t.time, isBuyerMaker: t.isBuyerMaker })).reverse();
  if (state.trades[0]) state.lastPrice = state.trades[0].price;
  renderTrades();
  scheduleBook();
}

function addTrade(t) {
  if (state.trades.some((x) => x.id === t.id)) return;
  const previous = state.lastPrice;
  state.trades.unshift(t);
  state.trades.length = Math.min(state.trades.length, 50);
  state.lastPrice = t.price;
  if (previous !== null) state.lastDirection = cmp(parse(t.price), parse(previous)) >= 0 ? 'up' : 'down';
  tradesDirty = true;
  scheduleBook();
}

let tradesDirty = false;

function renderTrades() {
  tradesDirty = false;
  $('trades').replaceChildren(...state.trades.map((t) => el('tr', { dataset: { tradeId: t.id } },
    el('td', { class: t.isBuyerMaker ? 'sell' : 'buy' }, px(t.price)),
    el('td', {}, qx(t.qty)),
    el('td', {}, timeText(t.time).slice(11)))));
}

// ---------------------------------------------------------------- order book

function scheduleBook() {
  if (bookFrame) return;
  bookFrame = requestAnimationFrame(renderBook);
}

function ladderRows(levels, side, maxTotal) {
  const last = state.lastPrice === null ? null : parse(state.lastPrice);
  let total = 0n;
  const rows = levels.map(([p, q]) => {
    total += parse(q);
    return { p, q, total };
  });
  const out = rows.map(({ p, q, total: t }) => {
    const tr = el('tr', { dataset: { price: p }, class: last !== null && last === parse(p) ? 'last-trade' : undefined },
      el('td', { class: 'price' }, px(p)),
      el('td', { class: 'qty' }, qx(q)),
      el('td', { class: 'total' }, qx(format(t))));
    const pct = maxTotal > 0n ? Number((t * 1000n) / maxTotal) / 10 : 0;
    tr.style.backgroundSize = `${pct}% 100%`;
    return tr;
  });
  return side === 'asks' ? out.reverse() : out;
}

// Everything the streams changed, drawn once a frame.
function renderBook() {
  bookFrame = 0;
  const frameStart = performance.now();
  if (tradesDirty) renderTrades();
  if (state.lastDirection) $('last-price').className = `last ${state.lastDirection}`;
  const book = state.book;
  if (!book) return;
  const bids = book.levels('bids', LEVELS);
  const asks = book.levels('asks', LEVELS);
  const sum = (ls) => ls.reduce((a, [, q]) => a + parse(q), 0n);
  const maxTotal = [sum(bids), sum(asks)].reduce((a, b) => (a > b ? a : b), 0n);
  $('bids').replaceChildren(...ladderRows(bids, 'bids', maxTotal));
  $('asks').replaceChildren(...ladderRows(asks, 'asks', maxTotal));
  $('spread').textContent = bids.length && asks.length ? px(format(parse(asks[0][0]) - parse(bids[0][0]))) : '–';
  $('last-price').textContent = state.lastPrice !== null ? px(state.lastPrice) : '–';
  $('book').dataset.updateId = String(book.lastUpdateId);
  $('book').dataset.synced = String(book.synced);
  const now = performance.now();
  for (const t of pendingDepth) performance.measure('mb-depth', { start: t, end: now });
  if (pendingDepth.length) performance.measure('mb-frame', { start: frameStart, end: now });
  pendingDepth.length = 0;
  if (performance.getEntriesByName('mb-depth').length > 5000) {
    performance.clearMeasures('mb-depth');
    performance.clearMeasures('mb-frame');
  }
  if (book.synced && !performance.getEntriesByName('mb-interactive').length && state.chartReady) {
    performance.mark('mb-interactive');
  }
}

// ---------------------------------------------------------------- chart

let chart = null;
let candles = null;
let volumes = null;
let candleData = [];

// Colours from the style sheet, read once (getComputedStyle forces a style
// recalculation: never on the hot path).
const colours = new Map();
function cssVar(name) {
  if (!colours.has(name)) colours.set(name, getComputedStyle(document.documentElement).getPropertyValue(name).trim());
  return colours.get(name);
}

function configureChart() {
  if (!chart) {
    chart = createChart($('chart'), {
      autoSize: true,
      // The logo injects a <style> element, which the page's policy refuses:
      // the attribution (TradingView's NOTICE asks for it) is in the footer.
      layout: { background: { color: cssVar('--panel') }, textColor: cssVar('--muted'), attributionLogo: false },
      grid: { vertLines: { color: cssVar('--line') }, horzLines: { color: cssVar('--line') } },
      timeScale: { timeVisible: true, secondsVisible: true },
    });
    candles = chart.addSeries(CandlestickSeries, {
      upColor: cssVar('--buy'), downColor: cssVar('--sell'), wickUpColor: cssVar('--buy'), wickDownColor: cssVar('--sell'), borderVisible: false,
    });
    volumes = chart.addSeries(HistogramSeries, { priceFormat: { type: 'volume' }, priceScaleId: '', color: cssVar('--muted') });
    volumes.priceScale().applyOptions({ scaleMargins: { top: 0.8, bottom: 0 } });
  }
  const tick = tickOf(state.market);
  candles.applyOptions({ priceFormat: { type: 'price', precision: pricePlaces(), minMove: Number(tick) } });
}

async function loadKlines() {
  const { symbol } = state.market;
  const { interval } = state;
  const rows = await publicGet('/api/v3/klines', { symbol, interval, limit: 500 });
  if (!current(symbol, interval)) return;
  candleData = rows.map((k) => ({ time: k[0] / 1000, open: +k[1], high: +k[2], low: +k[3], close: +k[4], volume: +k[5] }));
  candles.setData(candleData.map(({ volume, ...c }) => c));
  volumes.setData(candleData.map((c) => ({ time: c.time, value: c.volume, color: c.close >= c.open ? cssVar('--buy-bg') : cssVar('--sell-bg') })));
  chart.timeScale().scrollToRealTime();
  state.chartReady = true;
  scheduleBook();
}

// Candles from the stream are drawn at most 4 times a second: the chart
// redraws its whole canvas, which must not delay the ladder's frames.
let candleTimer = 0;
const pendingCandles = new Map();

function updateCandle(t, o, h, l, c, v) {
  pendingCandles.set(t, { time: t / 1000, open: +o, high: +h, low: +l, close: +c, volume: +v });
  if (!candleTimer) candleTimer = setTimeout(flushCandles, 250);
}

function flushCandles() {
  candleTimer = 0;
  const bars = [...pendingCandles.values()].sort((a, b) => a.time - b.time);
  pendingCandles.clear();
  for (const { volume, ...bar } of bars) {
    const last = candleData[candleData.length - 1];
    if (last && bar.time < last.time) continue;
    if (last && last.time === bar.time) candleData[candleData.length - 1] = { ...bar, volume };
    else candleData.push({ ...bar, volume });
    candles.update(bar);
    volumes.update({ time: bar.time, value: volume, color: bar.close >= bar.open ? cssVar('--buy-bg') : cssVar('--sell-bg') });
  }
}

function selectInterval(interval) {
  if (interval === state.interval) return;
  const sym = state.market.symbol.toLowerCase();
  state.stream.send('UNSUBSCRIBE', [`${sym}@kline_${state.interval}`]);
  state.interval = interval;
  pendingCandles.clear();
  // The stream's path subscribes the new interval on a reconnection too.
  state.stream.path = `/stream?streams=${sym}@depth@0ms/${sym}@trade/${sym}@ticker/${sym}@kline_${interval}`;
  state.stream.send('SUBSCRIBE', [`${sym}@kline_${interval}`]);
  for (const b of $('intervals').querySelectorAll('button')) b.classList.toggle('on', b.dataset.interval === interval);
  loadKlines().catch((e) => console.warn('klines', e.message));
}

// ---------------------------------------------------------------- order form

function formValues() {
  const type = $('order-type').value;
  const side = document.querySelector('input[name=side]:checked').value;
  return {
    type, side,
    price: $('price').value.trim(),
    stopPrice: $('stop-price').value.trim(),
    stopLimitPrice: $('stop-limit-price').value.trim(),
    qty: $('qty').value.trim(),
    quoteQty: $('quote-qty').value.trim(),
    byQuote: type === 'MARKET' && $('amount-mode').value === 'quote',
    tif: $('tif').value,
    postOnly: $('post-only').checked,
  };
}

function updateForm() {
  if (!state.market) return;
  const v = formValues();
  const limitLike = v.type === 'LIMIT' || v.type.endsWith('_LIMIT') || v.type === 'OCO';
  const show = (cls, on) => document.querySelectorAll(`#order-form .${cls}`).forEach((n) => { n.hidden = !on; });
  show('f-price', limitLike);
  show('f-stop', v.type.startsWith('STOP') || v.type.startsWith('TAKE') || v.type === 'OCO');
  show('f-stop-limit', v.type === 'OCO');
  show('f-mode', v.type === 'MARKET');
  show('f-qty', !v.byQuote);
  show('f-quote', v.byQuote);
  show('f-tif', (v.type === 'LIMIT' && !v.postOnly) || v.type.endsWith('_LIMIT') || v.type === 'OCO');
  show('f-post', v.type === 'LIMIT');
  const m = state.market;
  const btn = $('place-order');
  btn.className = v.side;
  btn.textContent = `${v.side === 'BUY' ? 'Buy' : 'Sell'} ${m.baseAsset}`;
  const asset = v.side === 'BUY' ? m.quoteAsset : m.baseAsset;
  const b = state.balances.get(asset);
  $('available').textContent = state.signer ? `${b ? fixed(b.free, 2) : '0'} ${asset}` : '–';
  if (m.status !== 'TRADING') {
    btn.disabled = true;
    $('form-status').textContent = '';
    $('form-error').textContent = `${m.symbol} is ${STATUS_TEXT[m.status] || m.status}: new orders are refused.`;
    $('order-form').dataset.refused = 'status';
  } else {
    if ($('order-form').dataset.refused === 'status') $('form-error').textContent = '';
    delete $('order-form').dataset.refused;
    btn.disabled = !state.signer;
    btn.title = state.signer ? '' : 'Sign in to trade';
  }
  checkForm();
}

// The market's filters (tick, lot, notional) and the balance, checked as the
// user types. Advisory: the server is the judge, and its refusal is shown.
function checkForm() {
  const m = state.market;
  const v = formValues();
  const priceHints = [];
  const qtyHints = [];
  const pf = filter(m, 'PRICE_FILTER');
  const lot = filter(m, v.type === 'MARKET' ? 'MARKET_LOT_SIZE' : 'LOT_SIZE');
  const notional = filter(m, 'NOTIONAL');
  const checkPrice = (text, name) => {
    if (!text) return null;
    const p = parse(text);
    if (p === null || p === 0n) { priceHints.push(`${name} is not a positive decimal.`); return null; }
    const tick = parse(pf.tickSize || '0');
    if (tick > 0n && p % tick !== 0n) priceHints.push(`${name} must be a multiple of the tick ${fixed(pf.tickSize, 0)}.`);
    if (pf.minPrice && p < parse(pf.minPrice)) priceHints.push(`${name} is below the minimum ${fixed(pf.minPrice, 0)}.`);
    if (pf.maxPrice && parse(pf.maxPrice) > 0n && p > parse(pf.maxPrice)) priceHints.push(`${name} is above the maximum ${fixed(pf.maxPrice, 0)}.`);
    return p;
  };
  const limitLike = v.type === 'LIMIT' || v.type.endsWith('_LIMIT') || v.type === 'OCO';
  const price = limitLike ? checkPrice(v.price, 'Price') : null;
  if (!$('stop-price').closest('label').hidden) checkPrice(v.stopPrice, 'Stop price');
  if (v.type === 'OCO') checkPrice(v.stopLimitPrice, 'Stop limit price');
  let spend = null;  // in the asset the order locks
  if (v.byQuote) {
    const q = v.quoteQty ? parse(v.quoteQty) : null;
    if (v.quoteQty && (q === null || q === 0n)) qtyHints.push('Total is not a positive decimal.');
    if (q && notional.minNotional && q < parse(notional.minNotional)) qtyHints.push(`Total is below the minimum notional ${fixed(notional.minNotional, 0)}.`);
    if (q && v.side === 'BUY') spend = q;
  } else if (v.qty) {
    const q = parse(v.qty);
    if (q === null || q === 0n) {
      qtyHints.push('Quantity is not a positive decimal.');
    } else {
      const step = parse(lot.stepSize || '0');
      if (step > 0n && q % step !== 0n) qtyHints.push(`Quantity must be a multiple of the step ${fixed(lot.stepSize, 0)}.`);
      if (lot.minQty && q < parse(lot.minQty)) qtyHints.push(`Quantity is below the minimum ${fixed(lot.minQty, 0)}.`);
      if (lot.maxQty && parse(lot.maxQty) > 0n && q > parse(lot.maxQty)) qtyHints.push(`Quantity is above the maximum ${fixed(lot.maxQty, 0)}.`);
      if (price && notional.minNotional && mul(price, q) < parse(notional.minNotional)) qtyHints.push(`Price × quantity is below the minimum notional ${fixed(notional.minNotional, 0)}.`);
      if (v.side === 'SELL') spend = q;
      else if (price) spend = mul(price, q);
    }
  }
  if (state.signer && spend !== null) {
    const asset = v.side === 'BUY' ? m.quoteAsset : m.baseAsset;
    const b = state.balances.get(asset);
    if (spend > (b ? parse(b.free) : 0n)) qtyHints.push(`More than the ${asset} available.`);
  }
  $('price-hint').textContent = priceHints.join(' ');
  $('qty-hint').textContent = qtyHints.join(' ');
}

function orderParams(v) {
  const m = state.market;
  const p = { symbol: m.symbol, side: v.side };
  if (v.type === 'LIMIT') {
    Object.assign(p, v.postOnly ? { type: 'LIMIT_MAKER' } : { type: 'LIMIT', timeInForce: v.tif });
    Object.assign(p, { price: v.price, quantity: v.qty });
  } else if (v.type === 'MARKET') {
    p.type = 'MARKET';
    if (v.byQuote) p.quoteOrderQty = v.quoteQty;
    else p.quantity = v.qty;
  } else if (v.type === 'STOP_LOSS_LIMIT' || v.type === 'TAKE_PROFIT_LIMIT') {
    Object.assign(p, { type: v.type, timeInForce: v.tif, price: v.price, stopPrice: v.stopPrice, quantity: v.qty });
  } else if (v.type === 'STOP_LOSS' || v.type === 'TAKE_PROFIT') {
    Object.assign(p, { type: v.type, stopPrice: v.stopPrice, quantity: v.qty });
  }
  p.newOrderRespType = 'FULL';
  return p;
}

// OCO: a LIMIT_MAKER on the profit side and a STOP_LOSS_LIMIT on the loss
// side (SELL: the limit above, the stop below; BUY: the reverse).
function ocoParams(v) {
  const limit = { Type: 'LIMIT_MAKER', Price: v.price };
  const stop = { Type: 'STOP_LOSS_LIMIT', Price: v.stopLimitPrice, StopPrice: v.stopPrice, TimeInForce: v.tif };
  const [above, below] = v.side === 'SELL' ? [limit, stop] : [stop, limit];
  const p = { symbol: state.market.symbol, side: v.side, quantity: v.qty };
  for (const [k, x] of Object.entries(above)) p[`above${k}`] = x;
  for (const [k, x] of Object.entries(below)) p[`below${k}`] = x;
  return p;
}

async function placeOrder(ev) {
  ev.preventDefault();
  const err = $('form-error');
  const ok = $('form-status');
  err.textContent = '';
  ok.textContent = '';
  if (!state.signer) {
    err.textContent = 'Sign in to trade.';
    return;
  }
  if (state.market.status !== 'TRADING') {
    updateForm();
    return;
  }
  const v = formValues();
  const btn = $('place-order');
  btn.disabled = true;
  try {
    if (v.type === 'OCO') {
      const r = await state.signer.signed('POST', '/api/v3/orderList/oco', ocoParams(v));
      ok.textContent = `OCO list ${r.orderListId} placed: ${r.listOrderStatus}`;
    } else {
      const r = await state.signer.signed('POST', '/api/v3/order', orderParams(v));
      const filled = r.executedQty !== undefined ? `, filled ${qx(r.executedQty)}` : '';
      ok.textContent = `Order ${r.orderId} ${r.status || 'accepted'}${filled}`;
    }
    await Promise.all([refreshOrders(), refreshBalances()]);
  } catch (e) {
    showError(err, e);
  } finally {
    updateForm();
  }
}

// ---------------------------------------------------------------- account

async function signIn(ev) {
  ev.preventDefault();
  const errNode = $('signin-error');
  errNode.textContent = '';
  const key = $('api-key').value.trim();
  const secretInput = $('api-secret');
  const secret = secretInput.value;
  secretInput.value = '';  // the page keeps only the WebCrypto key made from it
  let signer;
  try {
    signer = await Signer.create(key, secret);
    const account = await signer.signed('GET', '/api/v3/account');
    const { listenKey } = await signer.keyed('POST', '/api/v3/userDataStream');
    state.signer = signer;
    state.listenKey = listenKey;
    setBalances(account.balances);
  } catch (e) {
    signer?.forget();
    showError(errNode, e);
    return;
  }
  $('signin').hidden = true;
  $('signed-in').hidden = false;
  $('key-hint').textContent = `(key ${key.slice(0, 6)}…)`;
  $('account-hint').hidden = true;
  updateForm();  // signed in: the order button is enabled with the form shown, not after the views load
  state.userStream = new Stream(`/ws/${state.listenKey}`, {
    onMessage: onUserEvent,
    // Events missed while the connection was down are caught up from REST.
    onOpen: () => { refreshOrders(); refreshBalances(); },
  });
  state.keepAlive = setInterval(() => {
    state.signer?.keyed('PUT', '/api/v3/userDataStream', { listenKey: state.listenKey }).catch(() => {});
  }, 30 * 60 * 1000);
  await loadAccountViews();
  updateForm();
}

function signOut() {
  clearInterval(state.keepAlive);
  state.userStream?.close();
  state.userStream = null;
  const signer = state.signer;
  if (signer && state.listenKey) signer.keyed('DELETE', '/api/v3/userDataStream', { listenKey: state.listenKey }).catch(() => {}).finally(() => signer.forget());
  else signer?.forget();
  state.signer = null;
  state.listenKey = null;
  state.balances.clear();
  state.open.clear();
  state.history = [];
  state.fills = [];
  editing = null;
  $('api-key').value = '';
  $('signin').hidden = false;
  $('signed-in').hidden = true;
  $('account-hint').hidden = false;
  renderAccount();
  updateForm();
}

function setBalances(list) {
  state.balances.clear();
  for (const b of list) state.balances.set(b.asset, { free: b.free, locked: b.locked });
  renderAccount();
}

async function refreshBalances() {
  if (!state.signer) return;
  try {
    const a = await state.signer.signed('GET', '/api/v3/account');
    setBalances(a.balances);
    updateForm();
  } catch {
    // kept as they are; the stream goes on updating them
  }
}

async function refreshOrders() {
  if (!state.signer) return;
  try {
    const open = await state.signer.signed('GET', '/api/v3/openOrders');
    state.open = new Map(open.map((o) => [o.orderId, o]));
    renderAccount();
  } catch {
    // as above
  }
}

async function loadAccountViews() {
  if (!state.signer) return;
  const symbol = state.market.symbol;
  try {
    const [open, all, fills] = await Promise.all([
      state.signer.signed('GET', '/api/v3/openOrders'),
      state.signer.signed('GET', '/api/v3/allOrders', { symbol, limit: 100 }),
      state.signer.signed('GET', '/api/v3/myTrades', { symbol, limit: 100 }),
    ]);
    state.open = new Map(open.map((o) => [o.orderId, o]));
    state.history = all.filter((o) => !isOpen(o.status)).reverse();
    state.fills = fills.reverse();
  } catch (e) {
    showError($('signin-error'), e);
  }
  renderAccount();
}

function isOpen(status) {
  return status === 'NEW' || status === 'PARTIALLY_FILLED' || status === 'PENDING_NEW';
}

function onUserEvent(e) {
  if (e.e === 'outboundAccountPosition') {
    for (const b of e.B) state.balances.set(b.a, { free: b.f, locked: b.l });
    renderAccount();
    updateForm();
  } else if (e.e === 'balanceUpdate') {
    refreshBalances();
  } else if (e.e === 'executionReport') {
    const o = {
      symbol: e.s, orderId: e.i, clientOrderId: e.c, side: e.S, type: e.o, timeInForce: e.f,
      price: e.p, origQty: e.q, executedQty: e.z, cummulativeQuoteQty: e.Z, status: e.X,
      stopPrice: e.P, time: e.O, updateTime: e.T, orderListId: e.g,
    };
    if (e.x === 'TRADE' && e.s === state.market.symbol && !state.fills.some((f) => f.id === e.t)) {
      state.fills.unshift({ symbol: e.s, id: e.t, orderId: e.i, price: e.L, qty: e.l, commission: e.n, commissionAsset: e.N, time: e.T, isBuyer: e.S === 'BUY', isMaker: e.m });
    }
    if (isOpen(o.status)) {
      state.open.set(o.orderId, o);
    } else {
      state.open.delete(o.orderId);
      if (o.symbol === state.market.symbol) {
        state.history = [o, ...state.history.filter((h) => h.orderId !== o.orderId)];
      }
    }
    renderAccount();
  }
}

function orderRow(o, extra) {
  return el('tr', { dataset: { orderId: o.orderId } },
    el('td', {}, timeText(o.time)),
    el('td', { class: o.side }, o.side),
    el('td', { class: 'type' }, o.stopPrice && parse(o.stopPrice) ? `${o.type} (stop ${px(o.stopPrice)})` : o.type),
    el('td', { class: 'price' }, parse(o.price) ? px(o.price) : 'market'),
    el('td', { class: 'qty' }, qx(o.origQty)),
    el('td', { class: 'filled' }, qx(o.executedQty)),
    extra);
}

function renderAccount() {
  const symbol = state.market?.symbol;
  const open = [...state.open.values()].filter((o) => o.symbol === symbol).sort((a, b) => b.orderId - a.orderId);
  if (editing && !open.some((o) => o.orderId === editing.orderId)) editing = null;
  const focused = document.activeElement?.classList?.contains('amend-qty') ? 'amend-qty' : document.activeElement?.classList?.contains('amend-price') ? 'amend-price' : null;
  $('open-orders').tBodies[0].replaceChildren(...open.map((o) => (editing && editing.orderId === o.orderId ? amendEditor(o) : orderRow(o, el('td', {},
    o.type === 'LIMIT' ? el('button', { type: 'button', class: 'amend', onclick: () => startAmend(o) }, 'Amend') : null,
    ' ',
    el('button', { type: 'button', class: 'cancel', onclick: () => cancelOrder(o) }, 'Cancel'))))));
  if (focused) $('open-orders').querySelector(`input.${focused}`)?.focus();
  $('order-history').tBodies[0].replaceChildren(...state.history.slice(0, 100).map((o) => orderRow(o, el('td', { class: 'status' }, o.status))));
  $('fills').tBodies[0].replaceChildren(...state.fills.slice(0, 100).map((f) => el('tr', { dataset: { tradeId: f.id, orderId: f.orderId } },
    el('td', {}, timeText(f.time)),
    el('td', { class: f.isBuyer ? 'BUY' : 'SELL' }, f.isBuyer ? 'BUY' : 'SELL'),
    el('td', { class: 'price' }, px(f.price)),
    el('td', { class: 'qty' }, qx(f.qty)),
    el('td', { class: 'fee' }, `${fixed(f.commission, 0)} ${f.commissionAsset}`),
    el('td', {}, f.isMaker ? 'maker' : 'taker'))));
  const assets = [...state.balances.entries()].sort(([a], [b]) => a.localeCompare(b));
  $('balances').tBodies[0].replaceChildren(...assets.map(([asset, b]) => el('tr', { dataset: { asset } },
    el('td', {}, asset), el('td', { class: 'free' }, fixed(b.free, 2)), el('td', { class: 'locked' }, fixed(b.locked, 2)))));
}

async function cancelOrder(o) {
  const err = $('form-error');
  err.textContent = '';
  try {
    await state.signer.signed('DELETE', '/api/v3/order', { symbol: o.symbol, orderId: o.orderId });
    await Promise.all([refreshOrders(), refreshBalances()]);
  } catch (e) {
    showError(err, e);
  }
}

// The order being amended (its editor survives the table's redraws, which
// every account event causes): { orderId, price, qty } as typed.
let editing = null;

function startAmend(o) {
  editing = { orderId: o.orderId, price: px(o.price), qty: qx(o.origQty) };
  renderAccount();
}

function amendEditor(o) {
  const price = el('input', { class: 'amend-price', value: editing.price, 'aria-label': 'New price', oninput: (e) => { editing.price = e.target.value; } });
  const qty = el('input', { class: 'amend-qty', value: editing.qty, 'aria-label': 'New quantity', oninput: (e) => { editing.qty = e.target.value; } });
  const row = orderRow(o, el('td', {},
    el('button', { type: 'button', class: 'amend-save', onclick: () => saveAmend(o, editing.price.trim(), editing.qty.trim()) }, 'Save'), ' ',
    el('button', { type: 'button', class: 'amend-cancel', onclick: () => { editing = null; renderAccount(); } }, 'Back')));
  row.cells[3].replaceChildren(price);
  row.cells[4].replaceChildren(qty);
  return row;
}

// A lower quantity at the same price keeps the order's place in the queue
// (amend/keepPriority); any other change is a cancel-replace.
async function saveAmend(o, price, qty) {
  const err = $('form-error');
  err.textContent = '';
  const newPrice = parse(price);
  const newQty = parse(qty);
  try {
    if (newPrice === null || newQty === null) throw new ApiError(0, 0, 'Price and quantity must be decimals.');
    if (newPrice === parse(o.price) && newQty < parse(o.origQty)) {
      await state.signer.signed('PUT', '/api/v3/order/amend/keepPriority', { symbol: o.symbol, orderId: o.orderId, newQty: qty });
    } else {
      const left = newQty - parse(o.executedQty);
      if (left <= 0n) throw new ApiError(0, 0, 'The new quantity must exceed what is already filled.');
      const r = await state.signer.signed('POST', '/api/v3/order/cancelReplace', {
        symbol: o.symbol, cancelReplaceMode: 'STOP_ON_FAILURE', cancelOrderId: o.orderId,
        side: o.side, type: 'LIMIT', timeInForce: o.timeInForce || 'GTC', price, quantity: format(left),
      });
      if (r.newOrderResult && r.newOrderResult !== 'SUCCESS') throw new ApiError(0, 0, `Replacement failed: ${r.newOrderResponse?.msg || r.newOrderResult}`);
    }
    editing = null;
    await Promise.all([refreshOrders(), refreshBalances()]);
  } catch (e) {
    showError(err, e);
  }
  renderAccount();
}

// ---------------------------------------------------------------- wiring

function wire() {
  $('market').addEventListener('change', (e) => selectMarket(e.target.value).catch(fatal));
  $('intervals').addEventListener('click', (e) => {
    const i = e.target.dataset?.interval;
    if (i) selectInterval(i);
  });
  // A click on a level of the ladder copies its price into the form.
  $('book').addEventListener('click', (e) => {
    const p = e.target.closest('tr[data-price]')?.dataset.price;
    if (!p) return;
    $('price').value = px(p);
    checkForm();
  });
  $('order-form').addEventListener('submit', placeOrder);
  $('order-form').addEventListener('input', () => checkForm());
  $('order-form').addEventListener('change', () => updateForm());
  $('signin').addEventListener('submit', signIn);
  $('signout-btn').addEventListener('click', signOut);
  document.querySelector('.account .tabs').addEventListener('click', (e) => {
    const tab = e.target.dataset?.tab;
    if (!tab) return;
    for (const b of document.querySelectorAll('.account .tabs button')) b.classList.toggle('on', b.dataset.tab === tab);
    for (const p of document.querySelectorAll('.account [data-pane]')) p.hidden = p.dataset.pane !== tab;
  });
  setInterval(refreshStatus, 2000);
}

function fatal(e) {
  $('conn').textContent = `error: ${e.message}`;
  console.warn(e);
}

// For the tests and the curious: the chart's candles as the page holds them.
window.matchbook = { state, candles: () => candleData.slice() };

wire();
loadMarkets().catch(fatal);

// The operator page: the operator API (/admin/v1) with the admin token the
// user pastes (kept in memory only), and the server's own metrics (GET
// /metrics, Prometheus text) drawn as live charts.

import { createChart, LineSeries } from '/vendor/lightweight-charts.mjs';
import { adminCall, el, fetchText, publicGet } from '/lib/api.js';

const $ = (id) => document.getElementById(id);
const STATUS = { TRADING: 'TRADING', HALTED: 'HALTED', CANCEL_ONLY: 'CANCEL_ONLY', CLOSED: 'CLOSED' };

let token = null;
let timer = 0;
let assets = [];

async function openWith(t) {
  $('token-error').textContent = '';
  try {
    await adminCall(t, 'GET', '/health').catch((e) => {
      // 503 is an unhealthy server, not a wrong token.
      if (e.status !== 503) throw e;
    });
  } catch (e) {
    $('token-error').textContent = e.message;
    return;
  }
  token = t;
  $('token').value = '';
  $('token-form').hidden = true;
  $('token-hint').hidden = true;
  $('lock-btn').hidden = false;
  $('ops').hidden = false;
  const info = await publicGet('/api/v3/exchangeInfo');
  assets = [...new Set(info.symbols.flatMap((s) => [s.baseAsset, s.quoteAsset]))].sort();
  $('transfer-asset').replaceChildren(...assets.map((a) => el('option', { value: a }, a)));
  setupCharts();
  await refresh();
  timer = setInterval(refresh, 1000);
}

function lock() {
  token = null;
  clearInterval(timer);
  $('ops').hidden = true;
  $('token-form').hidden = false;
  $('token-hint').hidden = false;
  $('lock-btn').hidden = true;
}

function badge(node, good, text, base = '') {
  node.textContent = text;
  node.className = `${base} badge ${good ? 'good' : 'bad'}`.trim();
}

let refreshing = false;
async function refresh() {
  if (!token || refreshing) return;
  refreshing = true;
  try {
    await Promise.all([refreshHealth(), refreshMarkets(), refreshMetrics()]);
    $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
  } finally {
    refreshing = false;
  }
}

async function refreshHealth() {
  let health;
  try {
    health = await adminCall(token, 'GET', '/health');
  } catch (e) {
    health = e.body || { status: e.message };
  }
  badge($('health-status'), health.status === 'ok', health.status ?? '?');
  try {
    const r = await adminCall(token, 'GET', '/ready');
    badge($('ready-status'), r.ready !== false, 'ready');
  } catch (e) {
    badge($('ready-status'), false, e.status === 503 ? 'not ready' : e.message);
  }
  const rows = [
    ['role', health.role], ['durable sequence', health.durableSequence], ['applied sequence', health.appliedSequence],
    ['inbound ring free', health.inboundRemaining], ['commands submitted', health.submitted],
    ['refused (ring full)', health.refusedFull], ['refused (journal)', health.refusedJournal],
  ];
  if (health.projection) {
    const p = health.projection;
    rows.push(['projection', `${p.backend}, ${p.healthy ? 'healthy' : 'UNHEALTHY'}`], ['projection lag', `${p.lagEvents} events, ${Number(p.lagSeconds).toFixed(3)} s`]);
    if (p.lastError) rows.push(['projection error', p.lastError]);
  }
  if (health.reason) rows.push(['reason', health.reason]);
  $('health').replaceChildren(...rows.filter(([, v]) => v !== undefined).flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, String(v))]));
}

async function refreshMarkets() {
  const markets = await adminCall(token, 'GET', '/markets');
  const body = $('markets').tBodies[0];
  for (const m of markets) {
    let row = body.querySelector(`tr[data-symbol="${m.symbol}"]`);
    if (!row) {
      const select = el('select', { class: 'status-select', 'aria-label': `Status of ${m.symbol}` },
        ...Object.keys(STATUS).map((s) => el('option', { value: s }, s)));
      row = el('tr', { dataset: { symbol: m.symbol } },
        el('td', {}, m.symbol), el('td', {}, el('span', { class: 'status' })), el('td', { class: 'bids' }), el('td', { class: 'asks' }),
        el('td', {}, select, ' ', el('button', { type: 'button', class: 'apply', onclick: () => setStatus(m.symbol, select.value) }, 'Apply')));
      body.append(row);
      select.value = m.status;
    }
    badge(row.querySelector('.status'), m.status === 'TRADING', m.status, 'status');
    row.querySelector('.bids').textContent = m.bidLevels;
    row.querySelector('.asks').textContent = m.askLevels;
  }
}

async function setStatus(symbol, status) {
  await run(async () => {
    await adminCall(token, 'POST', `/markets/${symbol}/status`, { status });
    await refreshMarkets();
    return `${symbol} is now ${status}`;
  });
}

// Runs an operator action, showing its result or the server's error text.
async function run(fn) {
  $('ops-error').textContent = '';
  $('ops-result').textContent = '';
  try {
    $('ops-result').textContent = (await fn()) || '';
  } catch (e) {
    $('ops-error').textContent = e.message;
  }
}

async function refreshAccounts() {
  const list = await adminCall(token, 'GET', '/accounts');
  const details = await Promise.all(list.map((a) => adminCall(token, 'GET', `/accounts/${a.accountId}`)));
  $('accounts').tBodies[0].replaceChildren(...details.map((a) => el('tr', { dataset: { accountId: a.accountId } },
    el('td', {}, a.accountId), el('td', {}, a.name),
    el('td', { class: 'balances' }, (a.balances || []).filter((b) => Number(b.free) || Number(b.locked)).map((b) => `${b.asset} ${b.free} / ${b.locked}`).join(' · ') || '–'),
    el('td', { class: 'keys' }, ...(a.apiKeys || []).filter((k) => !k.revoked).map((k) => el('span', { class: 'key', dataset: { apiKey: k.apiKey } },
      `${k.apiKey.slice(0, 8)}… `, el('button', { type: 'button', class: 'revoke', title: `Revoke ${k.apiKey}`, onclick: () => revokeKey(k.apiKey) }, 'Revoke'), ' '))),
    el('td', {}, el('button', { type: 'button', class: 'new-key', onclick: () => newKey(a.accountId) }, 'New API key')))));
  const sel = $('transfer-account');
  const keep = sel.value;
  sel.replaceChildren(...list.map((a) => el('option', { value: a.accountId }, `${a.accountId} ${a.name}`)));
  if (keep) sel.value = keep;
}

async function newKey(accountId) {
  await run(async () => {
    const k = await adminCall(token, 'POST', `/accounts/${accountId}/apiKeys`, {});
    $('new-key-account').textContent = accountId;
    $('new-key-value').textContent = k.apiKey;
    $('new-key-secret').textContent = k.secretKey;
    $('new-key').hidden = false;
    await refreshAccounts();
    return `API key created for account ${accountId}`;
  });
}

async function revokeKey(apiKey) {
  await run(async () => {
    await adminCall(token, 'DELETE', `/apiKeys/${encodeURIComponent(apiKey)}`);
    await refreshAccounts();
    return `API key ${apiKey.slice(0, 8)}… revoked`;
  });
}

async function createAccount(ev) {
  ev.preventDefault();
  await run(async () => {
    const a = await adminCall(token, 'POST', '/accounts', { name: $('account-name').value.trim() });
    $('account-name').value = '';
    await refreshAccounts();
    $('transfer-account').value = a.accountId;
    return `Account ${a.accountId} (${a.name}) created`;
  });
}

async function transfer(ev) {
  ev.preventDefault();
  const kind = ev.submitter?.value === 'withdrawals' ? 'withdrawals' : 'deposits';
  await run(async () => {
    const ref = $('transfer-ref').value.trim() || `web-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
    const body = { accountId: Number($('transfer-account').value), asset: $('transfer-asset').value, amount: $('transfer-amount').value.trim(), ref };
    const r = await adminCall(token, 'POST', `/${kind}`, body);
    $('transfer-ref').value = '';
    await refreshAccounts();
    return `${kind === 'deposits' ? 'Deposit' : 'Withdrawal'} ${r.transferId}: ${body.amount} ${body.asset}, account ${body.accountId}${r.duplicate ? ' (duplicate reference: the first one stands)' : ''}`;
  });
}

// ---------------------------------------------------------------- metrics

// Prometheus text → [{name, labels, value}].
function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const [, k, v] of (m[2] || '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[k] = v;
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

const charts = {};
let previous = null;  // the last scrape: {t, samples}
let lastTime = 0;

function lineChart(id, lines) {
  const css = (n) => getComputedStyle(document.documentElement).getPropertyValue(n).trim();
  const chart = createChart($(id), {
    autoSize: true,
    layout: { background: { color: css('--panel') }, textColor: css('--muted'), attributionLogo: false },
    grid: { vertLines: { color: css('--line') }, horzLines: { color: css('--line') } },
    timeScale: { timeVisible: true, secondsVisible: true },
  });
  const colors = [css('--accent'), css('--warn'), css('--sell')];
  const series = lines.map((title, i) => chart.addSeries(LineSeries, { title, color: colors[i], lineWidth: 2, priceLineVisible: false }));
  return { chart, series };
}

function setupCharts() {
  if (charts.orders) return;
  charts.orders = lineChart('m-orders', ['orders/s']);
  charts.latency = lineChart('m-latency', ['p50', 'p99', 'p99.9']);
  charts.ring = lineChart('m-ring', ['% used']);
  charts.lag = lineChart('m-lag', ['events']);
  charts.ws = lineChart('m-ws', ['connections']);
  charts.dropped = lineChart('m-dropped', ['dropped/s']);
}

const sum = (samples, name, pred = () => true) => samples.filter((s) => s.name === name && pred(s.labels)).reduce((a, s) => a + s.value, 0);

// The q quantile of a histogram's observations between two scrapes (bucket
// deltas), in the buckets' unit; null when nothing was observed.
function quantile(now, before, stage, q) {
  const buckets = (samples) => new Map(samples.filter((s) => s.name === 'matchbook_stage_latency_seconds_bucket' && s.labels.stage === stage).map((s) => [s.labels.le, s.value]));
  const b1 = buckets(now);
  const b0 = before ? buckets(before) : new Map();
  const rows = [...b1.entries()].map(([le, v]) => [le === '+Inf' ? Infinity : Number(le), v - (b0.get(le) || 0)]).sort((a, b) => a[0] - b[0]);
  const total = rows.length ? rows[rows.length - 1][1] : 0;
  if (!total) return null;
  const rank = q * total;
  for (const [le, c] of rows) if (c >= rank) return Number.isFinite(le) ? le : rows[rows.length - 2]?.[0] ?? null;
  return null;
}

async function refreshMetrics() {
  let text;
  try {
    text = await fetchText('/metrics');
    $('metrics-error').textContent = '';
  } catch (e) {
    $('metrics-error').textContent = `GET /metrics: ${e.message}`;
    return;
  }
  const samples = parseMetrics(text);
  const t = Math.floor(Date.now() / 1000);
  const stages = [...new Set(samples.filter((s) => s.name === 'matchbook_stage_latency_seconds_count').map((s) => s.labels.stage))];
  const sel = $('m-stage');
  if (sel.options.length !== stages.length) {
    const keep = sel.value || (stages.includes('submit_to_durable') ? 'submit_to_durable' : stages[0]);
    sel.replaceChildren(...stages.map((s) => el('option', { value: s }, s)));
    sel.value = keep;
  }
  if (t <= lastTime) return;
  const before = previous;
  const dt = before ? t - before.t : 0;
  const point = (chart, i, value) => {
    if (value !== null && Number.isFinite(value)) chart.series[i].update({ time: t, value });
  };
  if (before && dt > 0) {
    point(charts.orders, 0, (sum(samples, 'matchbook_orders_total') - sum(before.samples, 'matchbook_orders_total')) / dt);
    point(charts.dropped, 0, (sum(samples, 'matchbook_ws_dropped_messages_total') - sum(before.samples, 'matchbook_ws_dropped_messages_total')) / dt);
    ['0.5', '0.99', '0.999'].forEach((q, i) => {
      const v = quantile(samples, before.samples, sel.value, Number(q));
      point(charts.latency, i, v === null ? null : v * 1000);
    });
  }
  const cap = sum(samples, 'matchbook_ring_capacity');
  if (cap) point(charts.ring, 0, (100 * (cap - sum(samples, 'matchbook_ring_remaining_capacity'))) / cap);
  point(charts.lag, 0, sum(samples, 'matchbook_projection_lag_events'));
  point(charts.ws, 0, sum(samples, 'matchbook_ws_connections'));
  previous = { t, samples };
  lastTime = t;
}

// ---------------------------------------------------------------- wiring

// For the tests: how many points each chart has drawn.
window.matchbookAdmin = { points: () => Object.fromEntries(Object.entries(charts).map(([k, c]) => [k, c.series[0].data().length])) };

$('token-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  openWith($('token').value.trim()).then(() => token && refreshAccounts()).catch((e) => { $('token-error').textContent = e.message; });
});
$('lock-btn').addEventListener('click', lock);
$('account-form').addEventListener('submit', createAccount);
$('transfer-form').addEventListener('submit', transfer);
$('new-key-done').addEventListener('click', () => {
  $('new-key').hidden = true;
  $('new-key-value').textContent = '';
  $('new-key-secret').textContent = '';
});

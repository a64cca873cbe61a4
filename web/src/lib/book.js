// A local copy of one market's order book, kept from the depth stream exactly
// as the API documents for any client (docs/api.md, "Depth diffs"; Binance's
// "how to manage a local order book"): buffer the stream's diffs, take a REST
// snapshot, drop the diffs it covers (u <= lastUpdateId), apply the first
// one that straddles it (U <= lastUpdateId + 1 <= u), then each next diff
// must start where the previous ended (U == previous u + 1); a gap starts over.

import { publicGet } from './api.js';
import { parse } from './decimal.js';

// Price text -> sort key, shared by every book (texts repeat).
const keys = new Map();

export class LocalBook {
  constructor(symbol, { limit = 1000, onChange, onResync } = {}) {
    this.symbol = symbol;
    this.limit = limit;
    this.onChange = onChange;
    this.onResync = onResync;
    this.bids = new Map();  // price text -> qty text
    this.asks = new Map();
    this.lastUpdateId = 0;
    this.synced = false;
    this.buffer = [];
    this.loading = false;
    this.resyncs = 0;
  }

  // A depthUpdate event from the stream.
  onDiff(ev) {
    if (!this.synced) {
      this.buffer.push(ev);
      if (!this.loading) this.load();
      return;
    }
    if (ev.u <= this.lastUpdateId) return;
    if (ev.U !== this.lastUpdateId + 1) {
      this.resync(ev);
      return;
    }
    this.apply(ev);
    this.onChange?.(this, ev);
  }

  // A new connection (its diffs are buffered from now on): take a snapshot.
  restart() {
    this.synced = false;
    this.buffer = [];
    if (!this.loading) this.load();
  }

  resync(ev) {
    this.resyncs++;
    this.synced = false;
    this.buffer = ev ? [ev] : [];
    this.onResync?.(this);
    if (!this.loading) this.load();
  }

  async load() {
    this.loading = true;
    try {
      for (let attempt = 0; attempt < 5; attempt++) {
        const snap = await publicGet('/api/v3/depth', { symbol: this.symbol, limit: this.limit });
        this.bids = new Map(snap.bids.map(([p, q]) => [p, q]));
        this.asks = new Map(snap.asks.map(([p, q]) => [p, q]));
        this.lastUpdateId = snap.lastUpdateId;
        const pending = this.buffer.filter((e) => e.u > this.lastUpdateId);
        this.buffer = [];
        let ok = true;
        for (const e of pending) {
          if (e.U > this.lastUpdateId + 1) {
            ok = false;  // the snapshot is older than the first diff kept: take another
            break;
          }
          this.apply(e);
        }
        if (ok) {
          this.synced = true;
          this.onChange?.(this, null);
          return;
        }
      }
    } finally {
      this.loading = false;
    }
  }

  apply(ev) {
    for (const [p, q] of ev.b) {
      if (parse(q) === 0n) this.bids.delete(p);
      else this.bids.set(p, q);
    }
    for (const [p, q] of ev.a) {
      if (parse(q) === 0n) this.asks.delete(p);
      else this.asks.set(p, q);
    }
    this.lastUpdateId = ev.u;
  }

  // The best n levels of a side as [price text, qty text], best first.
  levels(side, n) {
    const m = side === 'bids' ? this.bids : this.asks;
    const rows = [];
    for (const [p, q] of m) {
      let key = keys.get(p);
      if (key === undefined) {
        key = Number(p);  // exact enough to order prices of at most 15 digits
        keys.set(p, key);
      }
      rows.push([p, q, key]);
    }
    rows.sort(side === 'bids' ? (x, y) => y[2] - x[2] : (x, y) => x[2] - y[2]);
    if (keys.size > 100000) keys.clear();
    return rows.slice(0, n).map(([p, q]) => [p, q]);
  }
}

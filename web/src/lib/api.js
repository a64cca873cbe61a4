// The public API as the pages use it: REST calls (public, signed in the
// browser with WebCrypto HMAC-SHA256, operator calls with the admin token)
// and WebSocket streams. Every error is thrown as an ApiError carrying the
// server's own {code, msg}, so the pages can show the server's text.

export class ApiError extends Error {
  constructor(status, code, msg) {
    super(msg);
    this.status = status;
    this.code = code;
  }
}

async function call(method, url, { headers = {}, body } = {}) {
  let res;
  try {
    res = await fetch(url, { method, headers, body, cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, 0, `The server cannot be reached (${e.message}).`);
  }
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    const msg = json && typeof json.msg === 'string' ? json.msg : `HTTP ${res.status}`;
    const err = new ApiError(res.status, json ? json.code : 0, msg);
    err.data = json && json.data;
    err.body = json;
    throw err;
  }
  return json;
}

export function query(params) {
  return Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== null && v !== '')
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join('&');
}

export function publicGet(path, params = {}) {
  const q = query(params);
  return call('GET', `${path}${q ? `?${q}` : ''}`);
}

function hex(buffer) {
  return [...new Uint8Array(buffer)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

// A signed-in trader: the API key and a non-extractable WebCrypto key made
// from the secret. The secret string itself is not kept; forget() drops both.
export class Signer {
  static async create(apiKey, secret) {
    if (!globalThis.crypto || !crypto.subtle) {
      throw new ApiError(0, 0, 'This browser offers WebCrypto only on secure origins: open the page over https or on localhost.');
    }
    const key = await crypto.subtle.importKey('raw', new TextEncoder().encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    return new Signer(apiKey, key);
  }

  constructor(apiKey, key) {
    this.apiKey = apiKey;
    this.key = key;
  }

  forget() {
    this.apiKey = null;
    this.key = null;
  }

  async sign(text) {
    return hex(await crypto.subtle.sign('HMAC', this.key, new TextEncoder().encode(text)));
  }

  // A SIGNED call: GET/DELETE in the query string, POST/PUT in a form body.
  async signed(method, path, params = {}) {
    if (!this.key) throw new ApiError(401, 0, 'Not signed in.');
    const text = query({ ...params, timestamp: Date.now(), recvWindow: 10000 });
    const signed = `${text}&signature=${await this.sign(text)}`;
    const headers = { 'X-MBX-APIKEY': this.apiKey };
    if (method === 'GET' || method === 'DELETE') return call(method, `${path}?${signed}`, { headers });
    headers['Content-Type'] = 'application/x-www-form-urlencoded';
    return call(method, path, { headers, body: signed });
  }

  // An API-key call (the listen key of the user-data stream).
  keyed(method, path, params = {}) {
    const q = query(params);
    return call(method, `${path}${q ? `?${q}` : ''}`, { headers: { 'X-MBX-APIKEY': this.apiKey } });
  }
}

// Operator calls (/admin/v1) with the admin token.
export function adminCall(token, method, path, body) {
  const headers = { 'X-MB-ADMIN-TOKEN': token };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  return call(method, `/admin/v1${path}`, { headers, body: body === undefined ? undefined : JSON.stringify(body) });
}

export async function fetchText(path, headers = {}) {
  const res = await fetch(path, { headers, cache: 'no-store' });
  const text = await res.text();
  if (!res.ok) {
    let msg = `HTTP ${res.status}`;
    try {
      msg = JSON.parse(text).msg || msg;
    } catch {
      // not JSON
    }
    throw new ApiError(res.status, 0, msg);
  }
  return text;
}

export function wsUrl(path) {
  return `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}${path}`;
}

// A WebSocket that reconnects (after 1 s, then up to 10 s) until closed.
// onOpen(socket) runs at each (re)connection; onMessage(json) per message.
// `path` is what a (re)connection subscribes: a caller that changes its
// subscriptions updates it and sends the change. A change sent while the
// socket is still connecting (under the path from before the change) goes
// out once it opens; one sent while it is closed is dropped: the
// reconnection's path holds it.
export class Stream {
  constructor(path, { onOpen, onMessage, onState } = {}) {
    this.path = path;
    this.onOpen = onOpen;
    this.onMessage = onMessage;
    this.onState = onState;
    this.closed = false;
    this.delay = 1000;
    this.nextId = 1;
    this.connect();
  }

  connect() {
    const ws = new WebSocket(wsUrl(this.path));
    this.ws = ws;
    this.queued = [];
    ws.onopen = () => {
      this.delay = 1000;
      for (const m of this.queued) ws.send(m);
      this.queued = [];
      this.onState?.('open');
      this.onOpen?.(this);
    };
    ws.onmessage = (ev) => {
      let msg;
      try {
        msg = JSON.parse(ev.data);
      } catch {
        return;
      }
      this.onMessage?.(msg);
    };
    ws.onclose = () => {
      if (this.closed) return;
      this.onState?.('closed');
      setTimeout(() => !this.closed && this.connect(), this.delay);
      this.delay = Math.min(this.delay * 2, 10000);
    };
    ws.onerror = () => {};
  }

  send(method, params) {
    const m = JSON.stringify({ method, params, id: this.nextId++ });
    if (this.ws.readyState === WebSocket.CONNECTING) this.queued.push(m);
    else if (this.ws.readyState === WebSocket.OPEN) this.ws.send(m);
  }

  close() {
    this.closed = true;
    this.ws.close();
  }
}

// Text nodes only: nothing the server or a user sends is parsed as HTML.
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v === true) e.setAttribute(k, '');
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export function timeText(ms) {
  const d = new Date(Number(ms));
  return d.toISOString().replace('T', ' ').slice(0, 19);
}

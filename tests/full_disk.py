#!/usr/bin/env python3
"""The client side of tests/full_disk.sh (read that first).

  full_disk.py run BASE WORK    the scenario against a fresh server: B full,
                                C full, then A full; writes WORK/acked.json
  full_disk.py check BASE WORK  after a restart: every order answered 200 is
                                there, with its status
"""
import hashlib
import hmac
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse

BASE, WORK = sys.argv[2], sys.argv[3]
HOST, PORT = urllib.parse.urlparse(BASE).hostname, urllib.parse.urlparse(BASE).port
TOKEN = open(os.path.join(WORK, "a/d/admin.token")).read().strip()


def die(msg):
    sys.exit("full_disk.py: " + msg)


class Client:
    """One keep-alive connection; signs with (key, secret) when given."""

    def __init__(self, key=None, secret=None):
        self.key, self.secret = key, secret
        self.conn = http.client.HTTPConnection(HOST, PORT, timeout=60)

    def call(self, method, path, body=None, admin=False, params=None):
        headers = {}
        if admin:
            headers["X-MB-ADMIN-TOKEN"] = TOKEN
            headers["Content-Type"] = "application/json"
        if params is not None:
            params = dict(params, timestamp=int(time.time() * 1000), recvWindow=60000)
            q = urllib.parse.urlencode(params)
            sig = hmac.new(self.secret.encode(), q.encode(), hashlib.sha256).hexdigest()
            path = f"{path}?{q}&signature={sig}"
            headers["X-MBX-APIKEY"] = self.key
        data = json.dumps(body) if body is not None else None
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                text = r.read().decode()
                return r.status, (json.loads(text) if text else None), r.getheader("Retry-After")
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = http.client.HTTPConnection(HOST, PORT, timeout=60)
                if attempt == 1:
                    raise
        return None


def admin(method, path, body=None):
    status, doc, _ = Client().call(method, "/admin/v1/" + path, body, admin=True)
    if status != 200:
        die(f"{method} {path}: {status} {doc}")
    return doc


def metric(name):
    c = http.client.HTTPConnection(HOST, PORT, timeout=10)
    c.request("GET", "/metrics")
    total = 0.0
    found = False
    for line in c.getresponse().read().decode().splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
            found = True
    return total if found else None


def wait_for(what, pred, seconds=20, tick=None):
    end = time.time() + seconds
    while time.time() < end:
        if pred():
            return
        if tick:
            tick()
        else:
            time.sleep(0.05)
    die(f"timed out waiting for {what}")


def fill(path):
    """Takes every free block: big writes, then ever smaller ones, to ENOSPC."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    size = 1 << 20
    while size >= 1:
        try:
            os.write(fd, b"\xa5" * size)
        except OSError:
            size //= 2
    try:
        os.fsync(fd)
    except OSError:
        pass
    os.close(fd)


def snapshots():
    d = os.path.join(WORK, "b/snapshots")
    return {n: hashlib.sha256(open(os.path.join(d, n), "rb").read()).hexdigest()
            for n in sorted(os.listdir(d))}


class Trader:
    """Two accounts that trade with each other at one price; every 200 is
    recorded as acknowledged (FULL answers come once the record is durable)."""

    def __init__(self, creds):
        self.buyer = Client(creds["buyer"]["apiKey"], creds["buyer"]["secretKey"])
        self.seller = Client(creds["seller"]["apiKey"], creds["seller"]["secretKey"])
        self.acked = []  # (who, orderId, status)
        self.refused = []  # (message, retry_after)
        self.unexpected = []
        self.n = 0

    def one(self, resp_type="FULL"):
        self.n += 1
        who = "buyer" if self.n % 2 else "seller"
        c = self.buyer if who == "buyer" else self.seller
        status, doc, retry = c.call("POST", "/api/v3/order", params={
            "symbol": "BTCUSDT", "side": "BUY" if who == "buyer" else "SELL", "type": "LIMIT",
            "timeInForce": "GTC", "quantity": "0.001", "price": "10000",
            "newClientOrderId": f"fd-{self.n}", "newOrderRespType": resp_type})
        if status == 200:
            self.acked.append((who, doc["orderId"], doc.get("status")))
        elif status == 503:
            self.refused.append((doc.get("msg", ""), retry, doc.get("code")))
        else:
            self.unexpected.append((status, doc))
        return status


def run():
    buyer = admin("POST", "accounts", {"name": "fd-buyer"})["accountId"]
    seller = admin("POST", "accounts", {"name": "fd-seller"})["accountId"]
    creds = {"buyer": admin("POST", f"accounts/{buyer}/apiKeys", {}),
             "seller": admin("POST", f"accounts/{seller}/apiKeys", {})}
    admin("POST", "deposits", {"accountId": buyer, "asset": "USDT", "amount": "100000000",
                               "ref": "fd-usdt"})
    admin("POST", "deposits", {"accountId": seller, "asset": "BTC", "amount": "10000",
                               "ref": "fd-btc"})
    json.dump(creds, open(os.path.join(WORK, "creds.json"), "w"))
    t = Trader(creds)
    for _ in range(200):
        if t.one() != 200:
            die(f"order refused on an empty disk: {t.refused or t.unexpected}")
    admin("POST", "snapshot")
    wait_for("the first snapshot", lambda: (metric("matchbook_snapshots_total") or 0) >= 1)
    good = snapshots()
    if not good:
        die("no snapshot file")

    # --- B full: the snapshots and the projection have no room; trading goes on.
    fill(os.path.join(WORK, "b/filler"))
    before = metric("matchbook_snapshot_failures_total") or 0
    for _ in range(100):
        if t.one() != 200:
            die(f"B full stopped trading: {t.refused[-1:] or t.unexpected}")
    admin("POST", "snapshot")
    wait_for("the snapshot failure",
             lambda: (metric("matchbook_snapshot_failures_total") or 0) > before,
             tick=lambda: t.one() == 200 or die(f"B full stopped trading: {t.refused[-1:]}"))
    if snapshots() != good:
        die(f"a failed snapshot changed the snapshots: {good} -> {snapshots()}")
    wait_for("the projection to fail for lack of space",
             lambda: metric("matchbook_projection_healthy") == 0, seconds=30,
             tick=lambda: t.one() == 200 or die(f"B full stopped trading: {t.refused[-1:]}"))
    # The history store writes when a memtable fills (64 KiB here): orders
    # until its flush fails.
    wait_for("the history store to fail for lack of space",
             lambda: metric("matchbook_history_healthy") == 0, seconds=60,
             tick=lambda: t.one() == 200 or die(f"B full stopped trading: {t.refused[-1:]}"))
    if t.unexpected or t.refused:
        die(f"answers while B was full: {t.refused[:3]} {t.unexpected[:3]}")
    os.unlink(os.path.join(WORK, "b/filler"))
    wait_for("the projection to catch up", lambda: metric("matchbook_projection_healthy") == 1 and
             metric("matchbook_projection_applied_sequence") ==
             metric("matchbook_journal_durable_sequence"), seconds=30)
    wait_for("the history store to catch up", lambda: metric("matchbook_history_healthy") == 1 and
             metric("matchbook_history_applied_sequence") ==
             metric("matchbook_journal_durable_sequence"), seconds=30)
    written = metric("matchbook_snapshots_total")
    admin("POST", "snapshot")
    wait_for("a snapshot after B was freed",
             lambda: metric("matchbook_snapshots_total") > written)

    # --- C full: the log and the flight recorder have no room; trading goes
    # on (log lines and dumps are dropped).
    dump_errors = admin("GET", "flight-recorder")["dumpErrors"]
    fill(os.path.join(WORK, "c/filler"))
    for _ in range(100):
        if t.one() != 200:
            die(f"C full stopped trading: {t.refused[-1:] or t.unexpected}")
    wait_for("a flight-recorder dump to fail",
             lambda: admin("GET", "flight-recorder")["dumpErrors"] > dump_errors,
             tick=lambda: t.one() == 200 or die(f"C full stopped trading: {t.refused[-1:]}"))
    written = metric("matchbook_snapshots_total")
    admin("POST", "snapshot")  # its log line has nowhere to go
    wait_for("a snapshot while C was full", lambda: metric("matchbook_snapshots_total") > written)
    os.unlink(os.path.join(WORK, "c/filler"))

    # --- A full: the journal has no room; intake is refused, then resumes.
    # A flow of FULL orders runs throughout (its order in flight when the disk
    # fills waits until it is durable); the probes ask for ACK answers, which
    # come at once: 200 once taken (the order must survive too) or 503.
    stop = threading.Event()
    flow = Trader(creds)
    flow.n = 1_000_000

    def keep_trading():
        while not stop.is_set():
            try:
                if flow.one() != 200:
                    time.sleep(0.02)
            except Exception as e:  # reported below, with what the server said
                flow.unexpected.append(("exception", repr(e)))
                return
    th = threading.Thread(target=keep_trading)
    th.start()
    try:
        time.sleep(0.3)
        fill(os.path.join(WORK, "a/filler"))
        wait_for("a 503 once A is full", lambda: t.one("ACK") == 503, seconds=30)
        time.sleep(1.0)  # a while full: retries, flight-recorder dumps
        msg, retry, code = t.refused[0]
        if "No space left on device" not in msg or code != -1008 or not retry:
            die(f"the refusal does not say why: {t.refused[0]}")
        if not metric('matchbook_commands_refused_total{reason="journal"}'):
            die('matchbook_commands_refused_total{reason="journal"} did not count the refusal')
        if not metric("matchbook_journal_write_errors_total"):
            die("matchbook_journal_write_errors_total is 0")
        st, _, _ = Client().call("GET", "/admin/v1/ready", admin=True)
        if st != 503:
            die(f"/admin/v1/ready answered {st} while the journal was failing")
        if t.one("ACK") != 503:
            die("an order was taken while A was still full")
        refused = len(t.refused) + len(flow.refused)
        os.unlink(os.path.join(WORK, "a/filler"))
        wait_for("intake to resume once A is freed", lambda: t.one("ACK") == 200, seconds=30)
        acked = len(flow.acked)
        wait_for("the flow to go on",
                 lambda: len(flow.acked) > acked + 20 or flow.unexpected, seconds=30)
    finally:
        stop.set()
        th.join(60)
    if th.is_alive():
        die("an order in flight while A was full never completed")
    if flow.unexpected or t.unexpected:
        die(f"unexpected answers: {flow.unexpected[:3]} {t.unexpected[:3]}")
    for _ in range(50):
        if t.one() != 200:
            die(f"refused after A was freed: {t.refused[-1:]}")
    acked = t.acked + flow.acked
    json.dump(acked, open(os.path.join(WORK, "acked.json"), "w"))
    print(f"full disk: {len(acked)} orders acknowledged, {refused} refused while A was full, "
          f"{len(t.acked)} by the probing client")


def check():
    creds = json.load(open(os.path.join(WORK, "creds.json")))
    acked = json.load(open(os.path.join(WORK, "acked.json")))
    clients = {w: Client(c["apiKey"], c["secretKey"]) for w, c in creds.items()}
    for who, order_id, _ in acked:
        status, doc, _ = clients[who].call("GET", "/api/v3/order",
                                           params={"symbol": "BTCUSDT", "orderId": order_id})
        if status != 200 or doc.get("orderId") != order_id:
            die(f"acknowledged order {order_id} of {who} is gone after restart: {status} {doc}")
    print(f"full disk: all {len(acked)} acknowledged orders are there after restart")


{"run": run, "check": check}[sys.argv[1]]()

#!/usr/bin/env python3
"""Power-cut harness for `matchbook serve` (driven by scripts/power_cut.sh).

A SIGKILL keeps the page cache; a power cut does not. Here `serve` keeps its
data directory on ext4 on a loop device, and a cut is a copy of the loop
device's backing file taken while `serve` is stopped and the device has no
write in flight: what reached the device (everything fdatasync'ed) is in the
copy, what sat in the page cache may not be.

One run:
  1. A 256 MiB image (--image-mb), mkfs.ext4, loop device, mount; `serve` on it with 1 MiB
     journal segments, a snapshot every 2,000 events and every second, and the
     SQLite projection's WAL capped at 4 MiB (its floor).
  1b. With --prefill-events N, before serve first starts: `matchbook-bench
     fill` (--bench-bin, default the one beside --bin) grows the journal by N
     events through the Exchange serve runs (the same configuration and data
     directory; resting orders, cancels and crossing IOC orders of 256
     accounts at the top of the account range, on ETHUSDT). serve then starts
     on it and the cuts wait for its projection to catch up. With
     --prefill-via load instead: matchbook-load (--load-bin) drives the
     running server over the WebSocket API (session logon, ACK answers, 256
     accounts of its own, ETHUSDT) until its durable sequence
     (matchbook_journal_durable_sequence: records, one per command) reaches
     N; ~3,200 records/s on the 2-vCPU VM. Either way the prefill's
     accounts, orders and deposits are not acknowledgements: the checks below
     look only at the harness's own accounts and BTCUSDT orders, so the extra
     state changes what recovery loads, not what is checked. The image must
     hold it (--image-mb; about 600 bytes of journal and projection per
     record), every cut copies it (sparse), and each check's `verify
     --projection` reads all of it (minutes a cut at millions of records:
     --verify-projection-every K runs it on every K-th cut only).
  2. Load: accounts, API keys and deposits through the operator API, then
     signed LIMIT / IOC / MARKET orders (RESULT or FULL answers), cancels and
     more deposits from eight connections. Every acknowledged answer is kept.
  3. Cuts at chosen moments: `startup` (the first 1.5 s after `serve` is
     restarted, alternately after SIGKILL and SIGTERM), `roll` (a new journal
     segment appeared), `snapshot` (a snapshot file appeared after SIGUSR1;
     `snapshot-write` when its temporary file was caught, the write under way),
     `checkpoint` (the projection's database file changed: a WAL checkpoint),
     `load` (any moment). A cut: SIGSTOP, wait until every thread is stopped
     and the device has no write in flight, read its write counter, copy the
     image, read the counter again (a write during the copy discards the cut;
     another is taken), write the acknowledgements received so far beside the
     copy (acks.jsonl), SIGCONT.
  4. Each cut is checked: fsck.ext4 -n (after replaying the ext4 journal as a
     mount would), mount (an unmountable copy is counted apart), `serve` on it
     (the recovery time is the time to `ready`), every acknowledged account,
     API key, order, cancel and deposit present with the same ids (through
     the API), the projection caught up, a clean SIGTERM, then `matchbook
     verify`, `matchbook verify --projection` and `verify --history`. For every fifth cut, the
     recovering `serve` is itself cut in its first 0.2 s (`recovering`) and
     that copy checked the same way.

A run of more than --round-cuts cuts (default 20) is made of rounds, each
with a new primary (image, accounts, load, acknowledgements) in a directory
round-NNN: every cut copies and checks one round's data, however long the
run. The last line, for all rounds, is `N passed, M failed`. `--check DIR` repeats the check of one
cut directory (image.ext4 + acks.jsonl + matchbook.toml); images of passing
cuts are removed unless --keep-images.
"""

import argparse
import collections
import hashlib
import hmac
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

MOMENTS = ["startup", "roll", "snapshot", "checkpoint", "load"]
FINAL = {"FILLED", "CANCELED", "EXPIRED", "REJECTED"}


def log(msg):
    print(msg, flush=True)


# ---------------------------------------------------------------------------
# Mounts and loop devices, always released (see Cleanup()).

class Disks:
    def __init__(self):
        self.mounts = []   # mount points, newest last
        self.loops = []    # /dev/loopN

    def attach(self, image, mnt):
        dev = subprocess.run(["losetup", "--find", "--show", image], check=True,
                             capture_output=True, text=True).stdout.strip()
        self.loops.append(dev)
        os.makedirs(mnt, exist_ok=True)
        r = subprocess.run(["mount", "-t", "ext4", dev, mnt], capture_output=True, text=True)
        if r.returncode != 0:
            self.detach(dev)
            return None, r.stderr.strip()
        self.mounts.append(mnt)
        return dev, ""

    def release(self, dev, mnt):
        if mnt in self.mounts:
            subprocess.run(["umount", mnt], check=False)
            self.mounts.remove(mnt)
        self.detach(dev)

    def detach(self, dev):
        if dev in self.loops:
            subprocess.run(["losetup", "-d", dev], check=False)
            self.loops.remove(dev)

    def cleanup(self):
        for mnt in reversed(list(self.mounts)):
            subprocess.run(["umount", "-l", mnt], check=False)
        self.mounts.clear()
        for dev in list(self.loops):
            subprocess.run(["losetup", "-d", dev], check=False)
        self.loops.clear()


DISKS = Disks()
CHILDREN = []


def cleanup():
    for p in CHILDREN:
        if p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
                p.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
    DISKS.cleanup()


def make_image(path, size_mb):
    with open(path, "wb") as f:
        f.truncate(size_mb << 20)
    subprocess.run(["mkfs.ext4", "-q", "-m", "0", path], check=True)


def sparse_copy(src, dest):
    # The image is mostly holes: copying only what ext4 wrote keeps many cuts small.
    subprocess.run(["cp", "--sparse=always", src, dest], check=True)


def dev_name(dev):
    return os.path.basename(dev)


def write_ios(dev):
    with open(f"/sys/block/{dev_name(dev)}/stat") as f:
        return int(f.read().split()[4])


def writes_in_flight(dev):
    with open(f"/sys/block/{dev_name(dev)}/inflight") as f:
        return int(f.read().split()[1])


def all_threads_stopped(pid):
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if state not in ("T", "t", "Z", "X"):
                return False
    except FileNotFoundError:
        return True
    return True


def take_cut(pid, dev, backing, dest, on_stopped=None):
    """Copies `backing` to `dest` as a power cut of `dev` would leave it.

    Returns True when the copy is faithful; False (and no `dest`) when a
    write reached the device during the copy. `on_stopped` runs while the
    process is stopped, after the copy (it records the acknowledgements).
    """
    os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 3
        while not all_threads_stopped(pid):
            if time.monotonic() > deadline:
                return False  # a thread still in the kernel: it could answer after the copy
            time.sleep(0.001)
        while writes_in_flight(dev) != 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        before = write_ios(dev)
        if writes_in_flight(dev) != 0:
            return False
        sparse_copy(backing, dest)
        if write_ios(dev) != before or writes_in_flight(dev) != 0:
            os.unlink(dest)
            return False
        if on_stopped is not None:
            on_stopped()
        return True
    finally:
        os.kill(pid, signal.SIGCONT)


# ---------------------------------------------------------------------------
# `matchbook serve`.

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    def __init__(self, binary, config, data_dir, log_path, port=0):
        self.started = time.monotonic()
        self.log_file = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [binary, "serve", "--config", config, "--data-dir", data_dir, "--host", "127.0.0.1",
             "--port", str(port), "--weight-per-minute", "0", "--ip-weight-per-minute", "0",
             "--flight-threshold-ms", "0"],
            stdout=subprocess.PIPE, stderr=self.log_file)
        CHILDREN.append(self.proc)
        self.port = None
        self.ready_after = None
        self.ready = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        # serve's standard output goes to its log too: a line printed there
        # (and nowhere else) must not be lost if serve then exits.
        for raw in self.proc.stdout:
            try:
                self.log_file.write(b"stdout: " + raw)
                self.log_file.flush()
            except ValueError:  # closed by stop()
                pass
            line = raw.decode(errors="replace").strip()
            m = re.match(r"api: http://[^:]+:(\d+)/", line)
            if m:
                self.port = int(m.group(1))
            if line == "ready":
                self.ready_after = time.monotonic() - self.started
                self.ready.set()

    def wait_ready(self, timeout=60):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.ready.wait(0.05):
                return True
            if self.proc.poll() is not None:
                return False
        return False

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.reader.join(timeout=5)  # its last stdout lines into the log first
        self.log_file.close()
        return rc


# ---------------------------------------------------------------------------
# The API: operator calls and signed Binance calls.

class Api:
    def __init__(self, port, token):
        self.port = port
        self.token = token
        self.conn = None

    def _request(self, method, path, body=None, headers=None, timeout=30):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            self.conn.request(method, path, body=body, headers=headers or {})
            r = self.conn.getresponse()
            data = r.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = None
            raise
        try:
            return r.status, json.loads(data) if data else None
        except ValueError:
            return r.status, data.decode(errors="replace")

    def admin(self, method, path, doc=None):
        body = json.dumps(doc) if doc is not None else None
        return self._request(method, "/admin/v1/" + path, body,
                             {"X-MB-ADMIN-TOKEN": self.token, "Content-Type": "application/json"})

    def signed(self, method, path, key, secret, params):
        params = dict(params)
        params["timestamp"] = int(time.time() * 1000)
        params["recvWindow"] = 60000
        qs = urllib.parse.urlencode(params)
        sig = hmac.new(secret.encode(), qs.encode(), hashlib.sha256).hexdigest()
        text = f"{qs}&signature={sig}"
        headers = {"X-MBX-APIKEY": key}
        if method in ("GET", "DELETE"):
            return self._request(method, f"{path}?{text}", None, headers)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        return self._request(method, path, text, headers)


class Acks:
    """Every acknowledged answer, in the order received."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items = []

    def add(self, item):
        with self.lock:
            self.items.append(item)

    def upto_now(self):
        with self.lock:
            return list(self.items)


def write_acks(path, items):
    with open(path, "w") as f:
        for it in items:
            f.write(json.dumps(it, sort_keys=True) + "\n")


class Load:
    """Signed orders, cancels and deposits from a few connections."""

    def __init__(self, port, token, acks, seed):
        self.port = port
        self.token = token
        self.acks = acks
        self.seed = seed
        self.stop = threading.Event()
        self.accounts = []  # (id, key, secret)
        self.counter = 0
        self.counter_lock = threading.Lock()
        self.answered = 0
        self.threads = []

    def next_id(self):
        with self.counter_lock:
            self.counter += 1
            return self.counter

    def setup(self):
        api = Api(self.port, self.token)
        for name in ("pc-maker", "pc-taker"):
            st, acc = api.admin("POST", "accounts", {"name": name})
            assert st == 200, (st, acc)
            self.acks.add({"kind": "account", "accountId": acc["accountId"], "name": name})
            st, k = api.admin("POST", f"accounts/{acc['accountId']}/apiKeys")
            assert st == 200, (st, k)
            self.acks.add({"kind": "apiKey", "accountId": acc["accountId"], "apiKey": k["apiKey"],
                           "secretKey": k["secretKey"]})
            self.accounts.append((acc["accountId"], k["apiKey"], k["secretKey"]))
            for asset, amount in (("USDT", "50000000"), ("BTC", "2000")):
                self.deposit(api, acc["accountId"], asset, amount)

    def deposit(self, api, account, asset, amount):
        ref = f"pc-{self.seed}-dep-{self.next_id()}"
        st, d = api.admin("POST", "deposits", {"accountId": account, "asset": asset,
                                               "amount": amount, "ref": ref})
        if st == 200 and isinstance(d, dict) and "transferId" in d:
            self.acks.add({"kind": "deposit", "accountId": account, "ref": ref,
                           "transferId": d["transferId"], "asset": asset, "amount": amount})
            return True
        return False

    def start(self, workers=8):
        for w in range(workers):
            t = threading.Thread(target=self._worker, args=(w,), daemon=True)
            t.start()
            self.threads.append(t)

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)

    def _worker(self, w):
        rnd = random.Random(self.seed * 100 + w)
        account, key, secret = self.accounts[w % len(self.accounts)]
        api = Api(self.port, self.token)
        open_orders = []
        while not self.stop.is_set():
            try:
                roll = rnd.random()
                if roll < 0.05:
                    if self.deposit(api, account, "USDT", str(rnd.randint(1, 1000))):
                        self.answered += 1
                elif roll < 0.28 and open_orders:
                    order_id = open_orders.pop(rnd.randrange(len(open_orders)))
                    st, o = api.signed("DELETE", "/api/v3/order", key, secret,
                                       {"symbol": "BTCUSDT", "orderId": order_id})
                    if st == 200 and isinstance(o, dict) and o.get("status") == "CANCELED":
                        self.acks.add({"kind": "cancel", "accountId": account, "symbol": "BTCUSDT",
                                       "orderId": o["orderId"], "clientOrderId":
                                       o.get("origClientOrderId", o.get("clientOrderId"))})
                        self.answered += 1
                else:
                    cid = f"pc{self.seed}x{self.next_id()}"
                    p = {"symbol": "BTCUSDT", "side": rnd.choice(["BUY", "SELL"]),
                         "quantity": f"{rnd.randint(2, 40) * 0.0001:.4f}",
                         "newClientOrderId": cid,
                         "newOrderRespType": rnd.choice(["RESULT", "FULL"])}
                    kind = rnd.random()
                    if kind < 0.75:
                        p.update(type="LIMIT", timeInForce="GTC",
                                 price=f"{30000 + rnd.randint(-40, 40) * 0.5:.2f}")
                    elif kind < 0.9:
                        p.update(type="LIMIT", timeInForce="IOC",
                                 price=f"{30000 + rnd.randint(-40, 40) * 0.5:.2f}")
                    else:
                        p.update(type="MARKET")
                    st, o = api.signed("POST", "/api/v3/order", key, secret, p)
                    if st == 200 and isinstance(o, dict) and "orderId" in o:
                        self.acks.add({"kind": "order", "accountId": account, "symbol": "BTCUSDT",
                                       "orderId": o["orderId"], "clientOrderId": o["clientOrderId"],
                                       "status": o["status"], "executedQty": o["executedQty"]})
                        self.answered += 1
                        if o["status"] in ("NEW", "PARTIALLY_FILLED"):
                            open_orders.append(o["orderId"])
                            if len(open_orders) > 200:
                                open_orders.pop(0)
            except (OSError, http.client.HTTPException, ValueError):
                # serve stopped, restarting or cut: what was not answered is not acknowledged.
                time.sleep(0.02)


# ---------------------------------------------------------------------------
# The configuration: small segments, frequent snapshots and checkpoints.

def write_config(repo, path, fsync):
    with open(os.path.join(repo, "config", "matchbook.toml")) as f:
        text = f.read()
    text = re.sub(r'(?m)^fsync = "[^"]*"$', f'fsync = "{fsync}"', text)
    text = re.sub(r"(?m)^segment_mb = \d+$", "segment_mb = 1", text)
    text = re.sub(r"(?m)^every_events = \d+$", "every_events = 2000", text)
    text = re.sub(r"(?m)^every_seconds = \d+$", "every_seconds = 1", text)
    if re.search(r"(?m)^\[projection\]", text):
        raise SystemExit("power_cut: the default configuration gained [projection]; update the harness")
    # The SQL projection on (it is off by default) beside the history store:
    # both are cut and both checked.
    text += "\n[projection]\nbackend = \"sqlite\"\nwal_max_mb = 4\n"
    with open(path, "w") as f:
        f.write(text)


# ---------------------------------------------------------------------------
# Checking one cut.

def dec(s):
    return round(float(s) * 1e8)


def check_state(port, token, acks):
    """Every acknowledged answer against the recovered server; returns problems."""
    problems = []
    api = Api(port, token)
    keys = {}
    for a in acks:
        if a["kind"] == "apiKey":
            keys[a["accountId"]] = (a["apiKey"], a["secretKey"])
    accounts = {a["accountId"] for a in acks if a["kind"] == "account"}
    for acc in sorted(accounts):
        st, doc = api.admin("GET", f"accounts/{acc}")
        if st != 200:
            problems.append(f"account {acc}: {st} {doc}")
    # The projection catches up with the journal.
    end = time.monotonic() + 30
    lag = None
    while time.monotonic() < end:
        st, h = api.admin("GET", "health")
        proj = h.get("projection", {}) if isinstance(h, dict) else {}
        lag = proj.get("lagEvents")
        if st == 200 and lag == 0:
            break
        time.sleep(0.05)
    if lag != 0:
        # The history answers below would each wait for it and fail: say it once,
        # and count what the journal alone shows lost (an order's id and a
        # deposit's transfer id are their command's sequence; docs/engine.md).
        durable = h.get("durableSequence") if isinstance(h, dict) else None
        beyond = sum(1 for a in acks if isinstance(durable, int) and a["kind"] in
                     ("order", "deposit") and a.get("orderId", a.get("transferId")) > durable)
        problems.append(f"projection did not catch up: {lag} events behind; the history "
                        f"was not checked; {beyond} acknowledged orders and deposits "
                        f"are beyond the recovered sequence {durable}")
        return problems
    # Orders and cancels through allOrders (history + open orders), per account.
    orders = {}
    for acc, (key, secret) in keys.items():
        from_id = 1  # orderId 0 would mean "the newest" (Binance)
        while True:
            st, page = api.signed("GET", "/api/v3/allOrders", key, secret,
                                  {"symbol": "BTCUSDT", "orderId": from_id, "limit": 1000})
            if st != 200 or not isinstance(page, list):
                problems.append(f"allOrders for account {acc}: {st} {page}")
                break
            for o in page:
                orders[o["orderId"]] = o
            if len(page) < 1000:
                break
            from_id = page[-1]["orderId"] + 1
    for a in acks:
        if a["kind"] == "order":
            o = orders.get(a["orderId"])
            if o is None:
                problems.append(f"order {a['orderId']} ({a['clientOrderId']}, {a['status']}) lost")
            elif o["clientOrderId"] != a["clientOrderId"]:
                problems.append(f"order {a['orderId']}: clientOrderId {o['clientOrderId']} "
                                f"!= {a['clientOrderId']}")
            elif dec(o["executedQty"]) < dec(a["executedQty"]):
                problems.append(f"order {a['orderId']}: executedQty {o['executedQty']} "
                                f"< acknowledged {a['executedQty']}")
            elif a["status"] in FINAL and o["status"] != a["status"]:
                problems.append(f"order {a['orderId']}: status {o['status']} != {a['status']}")
        elif a["kind"] == "cancel":
            o = orders.get(a["orderId"])
            if o is None or o["status"] != "CANCELED":
                problems.append(f"cancel of {a['orderId']} lost "
                                f"({o['status'] if o else 'no order'})")
    # Deposits through the ledger: a deposit's transfer id is its command's
    # sequence, so the first ledger line at or after it is the deposit's own.
    for a in acks:
        if a["kind"] != "deposit":
            continue
        tid = a["transferId"]
        st, led = api.admin("GET", f"accounts/{a['accountId']}/ledger?fromSeq={tid}&limit=1")
        entries = led.get("entries", []) if st == 200 and isinstance(led, dict) else None
        if entries is None:
            problems.append(f"ledger of {a['accountId']}: {st} {led}")
            break
        elif not any(e.get("seq") == tid and e.get("reason") == "Deposit" and
                     str(e.get("ref")) == str(tid) for e in entries):
            problems.append(f"deposit {tid} ({a['ref']}) lost")
    return problems


def run_tool(args, out_path, timeout=300):
    """Runs a check tool into out_path; a tool over its time fails the check
    (a line in out_path says so) instead of stopping the harness."""
    with open(out_path, "ab") as f:
        f.write(f"$ {' '.join(args)}\n".encode())
        f.flush()
        try:
            return subprocess.run(args, stdout=f, stderr=subprocess.STDOUT,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write(f"power_cut: timed out after {timeout} s\n".encode())
            return -1


class Result:
    def __init__(self, cut_dir, moment):
        self.cut_dir = cut_dir
        self.moment = moment
        self.outcome = "passed"  # passed | failed | unmountable
        self.problems = []
        self.recovery_s = None
        self.nested = None  # a Result of the cut taken while recovering
        self.recovered = None  # serve's "recovered sequence ..." log line


def recovered_line(serve_log):
    """The last "recovered sequence ..." line of a serve log, without its stamp."""
    found = None
    try:
        with open(serve_log, errors="replace") as f:
            for line in f:
                i = line.find("recovered sequence")
                if i >= 0:
                    found = line[i:].strip()
    except FileNotFoundError:
        pass
    return found


def check_cut(binary, cut_dir, moment, keep_images, nested_cut=False, rnd=None,
              verify_projection=True):
    """Checks one cut directory; with nested_cut, cuts the recovering serve too."""
    res = Result(cut_dir, moment)
    image = os.path.join(cut_dir, "image.ext4")
    work = os.path.join(cut_dir, "recover.ext4")
    config = os.path.join(cut_dir, "matchbook.toml")
    tools_log = os.path.join(cut_dir, "check.log")
    with open(os.path.join(cut_dir, "acks.jsonl")) as f:
        acks = [json.loads(line) for line in f if line.strip()]
    sparse_copy(image, work)
    # Replay the ext4 journal as a mount would, then a read-only full check.
    run_tool(["e2fsck", "-E", "journal_only", "-p", work], tools_log)
    if run_tool(["fsck.ext4", "-f", "-n", work], tools_log) != 0:
        res.outcome = "failed"
        res.problems.append("fsck.ext4 -n found errors (check.log)")
    mnt = os.path.join(cut_dir, "mnt")
    dev, err = DISKS.attach(work, mnt)
    if dev is None:
        res.outcome = "unmountable"
        res.problems.append(f"mount: {err}")
        os.unlink(work)
        return res
    checked = False
    try:
        data = os.path.join(mnt, "data")
        if not os.path.isdir(data):
            # Cut before `serve` created its directory: nothing was acknowledged yet.
            if acks:
                res.problems.append("data directory missing")
            checked = True
            return res
        serve = Serve(binary, config, data, os.path.join(cut_dir, "serve.log"))
        if nested_cut:
            time.sleep(rnd.uniform(0, 0.2))
            sub = os.path.join(cut_dir, "recovering")
            os.makedirs(sub, exist_ok=True)
            shutil.copyfile(config, os.path.join(sub, "matchbook.toml"))
            taken = False
            for _ in range(20):
                if serve.proc.poll() is not None:
                    break
                if take_cut(serve.proc.pid, dev, work, os.path.join(sub, "image.ext4"),
                            lambda: write_acks(os.path.join(sub, "acks.jsonl"), acks)):
                    taken = True
                    with open(os.path.join(sub, "moment"), "w") as f:
                        f.write("recovering\n" if not serve.ready.is_set() else
                                "recovering (after ready)\n")
                    break
                time.sleep(0.01)
            res.nested = sub if taken else None
        if not serve.wait_ready():
            res.problems.append(f"serve did not become ready (exit {serve.proc.poll()}; serve.log)")
            serve.stop(signal.SIGKILL)
            return res
        res.recovery_s = serve.ready_after
        res.recovered = recovered_line(os.path.join(cut_dir, "serve.log"))
        with open(os.path.join(data, "admin.token")) as f:
            token = f.read().strip()
        try:
            res.problems += check_state(serve.port, token, acks)
        except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
            res.problems.append(f"API check: {e!r}")
        rc = serve.stop()
        if rc != 0:
            res.problems.append(f"serve exited {rc} on SIGTERM (serve.log)")
        if run_tool([binary, "verify", data, "--config", config], tools_log) != 0:
            res.problems.append("matchbook verify failed (check.log)")
        # The whole projection rebuilt and compared: minutes at millions of records.
        if verify_projection and run_tool([binary, "verify", "--projection", data, "--config",
                                           config], tools_log, timeout=3600) != 0:
            res.problems.append("matchbook verify --projection failed (check.log)")
        if verify_projection and run_tool([binary, "verify", "--history", data, "--config",
                                           config], tools_log, timeout=3600) != 0:
            res.problems.append("matchbook verify --history failed (check.log)")
        checked = True
    finally:
        DISKS.release(dev, mnt)
        if res.problems and res.outcome == "passed":
            res.outcome = "failed"
        os.unlink(work)
        # The image goes only after a check that ran to its end and passed
        # (an exception part-way keeps it for --check).
        if checked and res.outcome == "passed" and not keep_images:
            os.unlink(image)
    return res


# ---------------------------------------------------------------------------
# The run.

class Primary:
    """The `serve` under load whose disk is cut."""

    def __init__(self, binary, run_dir, config, image_mb):
        self.binary = binary
        self.run_dir = run_dir
        self.config = config
        self.image = os.path.join(run_dir, "primary.ext4")
        self.mnt = os.path.join(run_dir, "primary")
        make_image(self.image, image_mb)
        self.dev, err = DISKS.attach(self.image, self.mnt)
        if self.dev is None:
            raise RuntimeError(f"cannot mount the primary image: {err}")
        self.data = os.path.join(self.mnt, "data")
        self.port = free_port()
        self.restarts = 0
        self.serve = None

    def start(self):
        self.serve = Serve(self.binary, self.config, self.data,
                           os.path.join(self.run_dir, "primary-serve.log"), self.port)

    def restart(self):
        self.restarts += 1
        self.serve.stop(signal.SIGKILL if self.restarts % 2 else signal.SIGTERM)
        self.start()

    def token(self):
        with open(os.path.join(self.data, "admin.token")) as f:
            return f.read().strip()


def journal_segments(data):
    try:
        return len(os.listdir(os.path.join(data, "journal")))
    except FileNotFoundError:
        return 0


def snapshot_names(data):
    try:
        return set(os.listdir(os.path.join(data, "snapshots")))
    except FileNotFoundError:
        return set()


def projection_stamp(data):
    try:
        st = os.stat(os.path.join(data, "projection.sqlite"))
        return (st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        return None


def wait_for(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.001)
    return False


def metrics(port):
    """The server's GET /metrics as {name: value} (unlabelled samples only)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode(errors="replace")
    finally:
        conn.close()
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and not line.startswith("#") and "{" not in parts[0]:
            try:
                out[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return out


def journal_bytes(data):
    d = os.path.join(data, "journal")
    try:
        return sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))
    except FileNotFoundError:
        return 0


def file_mib(path):
    try:
        return os.path.getsize(path) / 2**20
    except FileNotFoundError:
        return 0.0


# The prefill's order flow: matchbook-load over the WebSocket API (session
# logon, so no per-request HMAC; the fastest path on the 2-vCPU VM), ACK answers,
# far more offered than the server takes (an open-loop generator drops the rest),
# on ETHUSDT so the harness's BTCUSDT book and accounts are left as they are.
PREFILL_SYMBOL = "ETHUSDT"
PREFILL_RATE = 30000


def prefill(primary, load_bin, target, seed, run_dir):
    """Drives the primary until its durable journal sequence reaches `target`.

    The journal's sequence counts records (one per command: an order, a cancel,
    a deposit, ...); an order's fills are events inside its record. Returns
    (records, seconds).
    """
    log_path = os.path.join(run_dir, "prefill-load.log")
    started = time.monotonic()
    m = metrics(primary.port)
    seq = int(m.get("matchbook_journal_durable_sequence", 0))
    log(f"prefill: to {target:,} journal records with {load_bin} ({PREFILL_SYMBOL}, ws-api, "
        f"ACK answers, {PREFILL_RATE:,}/s offered); from {seq:,}")
    attempt = 0
    last_t, last_seq = started, seq
    while seq < target:
        attempt += 1
        if attempt > 5:
            raise RuntimeError(f"prefill: matchbook-load kept exiting ({log_path})")
        with open(log_path, "ab") as lf:
            load = subprocess.Popen(
                [load_bin, "--target", f"http://127.0.0.1:{primary.port}",
                 "--admin-token", primary.token(), "--preset", "snaptrade",
                 "--duration", "86400", "--rate", str(PREFILL_RATE), "--resp-type", "ACK",
                 "--connections", "64", "--subscribers", "0", "--accounts", "256",
                 "--symbol", PREFILL_SYMBOL, "--transport", "ws-api", "--ws-auth", "session",
                 "--seed", str(seed * 10 + attempt)],
                stdout=lf, stderr=subprocess.STDOUT)
        CHILDREN.append(load)
        try:
            while seq < target and load.poll() is None:
                time.sleep(5)
                m = metrics(primary.port)
                seq = int(m.get("matchbook_journal_durable_sequence", seq))
                now = time.monotonic()
                log(f"prefill: {seq:,} records ({(seq - last_seq) / (now - last_t):,.0f}/s), "
                    f"projection {int(m.get('matchbook_projection_lag_events', -1)):,} events "
                    f"behind, journal {journal_bytes(primary.data) / 2**20:,.0f} MiB in "
                    f"{journal_segments(primary.data)} segments, {now - started:.0f} s")
                last_t, last_seq = now, seq
        finally:
            if load.poll() is None:
                load.send_signal(signal.SIGINT)
                try:
                    load.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    load.kill()
                    load.wait()
    fill_s = time.monotonic() - started
    # The cuts are checked against a projection that catches up within 30 s
    # (check_state): start them with the primary's projection caught up.
    end = time.monotonic() + 600
    lag = None
    while time.monotonic() < end:
        m = metrics(primary.port)
        lag = int(m.get("matchbook_projection_lag_events", -1))
        if lag == 0:
            break
        time.sleep(1)
    seq = int(m.get("matchbook_journal_durable_sequence", seq))
    log(f"prefill: {seq:,} journal records in {fill_s:.0f} s ({seq / fill_s:,.0f}/s); "
        f"projection caught up after {time.monotonic() - started - fill_s:.0f} s more "
        f"(lag {lag}); journal {journal_bytes(primary.data) / 2**20:,.0f} MiB in "
        f"{journal_segments(primary.data)} segments, projection "
        f"{file_mib(os.path.join(primary.data, 'projection.sqlite')):,.0f} MiB")
    return seq, fill_s


def prefill_fill(primary, bench_bin, config, target, seed, run_dir):
    """Before serve first starts: `matchbook-bench fill` grows the primary's
    journal by `target` events through the Exchange serve runs (its config,
    its data directory), without the API. Returns (events, seconds)."""
    os.makedirs(primary.data, exist_ok=True)
    log_path = os.path.join(run_dir, "prefill-fill.log")
    log(f"prefill: {target:,} events with {bench_bin} fill ({PREFILL_SYMBOL}, 256 accounts at "
        f"the top of the account range)")
    started = time.monotonic()
    with open(log_path, "wb") as lf:
        try:
            # ~1 M events/s: an hour is far more than any fill needs.
            rc = subprocess.call([bench_bin, "fill", "--config", config, "--data-dir",
                                  primary.data, "--market", PREFILL_SYMBOL, "--events",
                                  str(target), "--seed", str(seed)],
                                 stdout=lf, stderr=subprocess.STDOUT, timeout=3600)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"prefill: matchbook-bench fill ran over an hour ({log_path})")
    fill_s = time.monotonic() - started
    if rc != 0:
        raise RuntimeError(f"prefill: matchbook-bench fill exited {rc} ({log_path})")
    with open(log_path) as f:
        lines = [line.strip() for line in f if line.startswith("fill: ") and " records " in line]
    log(f"prefill: {lines[-1] if lines else '?'} ({fill_s:.0f} s); journal "
        f"{journal_bytes(primary.data) / 2**20:,.0f} MiB in {journal_segments(primary.data)} segments")
    return target, fill_s


def wait_projection(primary, started, timeout):
    """Waits until the primary's projection has caught up with its journal."""
    end = time.monotonic() + timeout
    lag = None
    while time.monotonic() < end:
        m = metrics(primary.port)
        lag = int(m.get("matchbook_projection_lag_events", -1))
        if lag == 0:
            break
        time.sleep(1)
    if lag != 0:
        raise RuntimeError(f"prefill: the projection did not catch up in {timeout} s (lag {lag})")
    log(f"prefill: projection caught up {time.monotonic() - started:.0f} s after serve started "
        f"(lag {lag}); projection {file_mib(os.path.join(primary.data, 'projection.sqlite')):,.0f} MiB")


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def run_round(args, cuts, run_dir, seed):
    """One primary, `cuts` cuts of it and their checks; returns the results."""
    binary = os.path.abspath(args.bin)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rnd = random.Random(seed)
    os.makedirs(run_dir, exist_ok=True)
    config = os.path.join(run_dir, "matchbook.toml")
    write_config(repo, config, args.fsync)
    n_nested = cuts // 5
    n_main = cuts - n_nested
    plan = [MOMENTS[i % len(MOMENTS)] for i in range(n_main)]
    rnd.shuffle(plan)
    log(f"power_cut: journal.fsync = {args.fsync}; {cuts} cuts ({n_main} of the primary under load, {n_nested} of a "
        f"recovering server) in {run_dir}; serve = {binary}")

    started = time.monotonic()
    primary = Primary(binary, run_dir, config, args.image_mb)
    if args.prefill_events and args.prefill_via == "fill":
        bench_bin = args.bench_bin or os.path.join(os.path.dirname(binary), "matchbook-bench")
        if not os.access(bench_bin, os.X_OK):
            raise RuntimeError(f"--prefill-events needs matchbook-bench (no {bench_bin}; --bench-bin)")
        prefill_fill(primary, os.path.abspath(bench_bin), config, args.prefill_events, seed,
                     run_dir)
    primary.start()
    serve_started = time.monotonic()
    if not primary.serve.wait_ready():
        raise RuntimeError("the primary serve did not start (primary-serve.log)")
    if args.prefill_events and args.prefill_via == "fill":
        log(f"prefill: the primary recovered in {primary.serve.ready_after:.3f} s: "
            f"{recovered_line(os.path.join(run_dir, 'primary-serve.log'))}")
        wait_projection(primary, serve_started, 3600)
    elif args.prefill_events:
        load_bin = args.load_bin or os.path.join(os.path.dirname(binary), "matchbook-load")
        if not os.access(load_bin, os.X_OK):
            raise RuntimeError(f"--prefill-events needs matchbook-load (no {load_bin}; --load-bin)")
        prefill(primary, os.path.abspath(load_bin), args.prefill_events, seed, run_dir)
    acks = Acks()
    load = Load(primary.port, primary.token(), acks, seed)
    load.setup()
    load.start()
    time.sleep(1.0)

    cuts = []  # (cut_dir, moment)
    discarded = 0
    for i, moment in enumerate(plan):
        cut_dir = os.path.join(run_dir, f"cut-{i + 1:03d}")
        os.makedirs(cut_dir)
        shutil.copyfile(config, os.path.join(cut_dir, "matchbook.toml"))
        label = moment
        if moment == "startup":
            primary.restart()
            time.sleep(rnd.uniform(0, 1.5))
        elif moment == "roll":
            n = journal_segments(primary.data)
            if not wait_for(lambda: journal_segments(primary.data) != n, 20):
                label = "load"
        elif moment == "snapshot":
            # Cut as soon as the snapshot's temporary file appears (its write
            # under way: "snapshot-write"), else once the file is in place.
            before = snapshot_names(primary.data)
            primary.serve.proc.send_signal(signal.SIGUSR1)
            if not wait_for(lambda: snapshot_names(primary.data) - before, 5):
                label = "load"
        elif moment == "checkpoint":
            stamp = projection_stamp(primary.data)
            if not wait_for(lambda: projection_stamp(primary.data) != stamp, 10):
                label = "load"
        else:
            time.sleep(rnd.uniform(0.1, 1.0))
        taken = False
        while not taken:
            if primary.serve.proc.poll() is not None:
                rc = primary.serve.proc.returncode
                how = f"signal {-rc}" if rc < 0 else f"status {rc}"
                raise RuntimeError(f"the primary serve exited ({how}; primary-serve.log)")
            writing = []

            def on_stopped():
                write_acks(os.path.join(cut_dir, "acks.jsonl"), acks.upto_now())
                # serve is stopped: a temporary snapshot file now is a write under way.
                writing.append(any(n.endswith(".tmp") for n in snapshot_names(primary.data)))

            taken = take_cut(primary.serve.proc.pid, primary.dev, primary.image,
                             os.path.join(cut_dir, "image.ext4"), on_stopped)
            if taken and label == "snapshot" and writing and writing[0]:
                label = "snapshot-write"
            if not taken:
                discarded += 1
        with open(os.path.join(cut_dir, "moment"), "w") as f:
            f.write(label + "\n")
        cuts.append((cut_dir, label))
        log(f"cut {i + 1}: {label}, {sum(1 for _ in open(os.path.join(cut_dir, 'acks.jsonl')))} "
            f"acknowledgements")
        time.sleep(rnd.uniform(0.05, 0.4))
    load.join()
    load_s = time.monotonic() - started
    rc = primary.serve.stop()
    log(f"the primary's journal: {journal_bytes(primary.data) / 2**20:,.0f} MiB in "
        f"{journal_segments(primary.data)} segments; projection "
        f"{file_mib(os.path.join(primary.data, 'projection.sqlite')):,.0f} MiB")
    fs = os.statvfs(primary.mnt)
    used_mb = (fs.f_blocks - fs.f_bfree) * fs.f_frsize / 2**20
    log(f"the primary's file system: {used_mb:.0f} of {args.image_mb} MiB used")
    DISKS.release(primary.dev, primary.mnt)
    if not args.keep_images:
        os.unlink(primary.image)
    log(f"load: {len(acks.items)} acknowledged answers in {load_s:.1f} s; the primary exited {rc}; "
        f"{discarded} cut(s) discarded (a write during the copy) and taken again")

    results = []
    nested_left = n_nested
    for idx, (cut_dir, label) in enumerate(cuts):
        want_nested = nested_left > 0 and (idx % 4 == 0 or len(cuts) - idx <= nested_left)
        every = args.verify_projection_every
        res = check_cut(binary, cut_dir, label, args.keep_images, want_nested, rnd,
                        verify_projection=every > 0 and idx % every == 0)
        results.append(res)
        report(res)
        if res.nested:
            nested_left -= 1
            sub = check_cut(binary, res.nested, "recovering", args.keep_images,
                            verify_projection=every > 0 and idx % every == 0)
            results.append(sub)
            report(sub)
    log(f"checks: {time.monotonic() - started - load_s:.1f} s")
    return results


def report(res):
    rec = f"{res.recovery_s * 1000:.0f} ms" if res.recovery_s is not None else "-"
    when = os.path.join(res.cut_dir, "moment")
    if res.moment == "recovering" and os.path.exists(when):
        rec += " (cut " + ("before" if open(when).read().strip() == "recovering" else "after")
        rec += " its parent's serve was ready)"
    log(f"{os.path.basename(os.path.dirname(res.cut_dir)) + '/' if res.moment == 'recovering' else ''}"
        f"{os.path.basename(res.cut_dir)} [{res.moment}]: {res.outcome}, recovery {rec}")
    if res.recovered:
        log(f"  {res.recovered}")
    for p in res.problems[:20]:
        log(f"  {p}")
    if len(res.problems) > 20:
        log(f"  ... {len(res.problems) - 20} more")


def summarize(results, wanted):
    by = collections.OrderedDict()
    for m in MOMENTS + ["snapshot-write", "recovering"]:
        by[m] = [0, 0, 0]
    for r in results:
        c = by.setdefault(r.moment, [0, 0, 0])
        c[0] += 1
        if r.outcome == "passed":
            c[1] += 1
        elif r.outcome == "unmountable":
            c[2] += 1
    log("moment          cuts  survived  unmountable")
    for m, (n, ok, um) in by.items():
        log(f"{m:<15} {n:>4}  {ok:>8}  {um:>11}")
    times = [r.recovery_s * 1000 for r in results if r.recovery_s is not None]
    log(f"recovery time to ready: p50 {percentile(times, 50):.0f} ms, max "
        f"{max(times) if times else float('nan'):.0f} ms over {len(times)} recoveries")
    passed = sum(1 for r in results if r.outcome == "passed")
    failed = len(results) - passed
    if len(results) < wanted:
        log(f"power_cut: only {len(results)} of {wanted} cuts were taken")
        failed += wanted - len(results)
    log(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def run(args):
    """The cuts in rounds of at most --round-cuts, each round a new primary
    (its own image, accounts, load and acknowledgements), so that a run of
    thousands of cuts keeps each cut's copy and check the size of one
    round's data rather than growing with the whole run."""
    rounds = (args.cuts + args.round_cuts - 1) // args.round_cuts
    results = []
    for r in range(rounds):
        cuts = min(args.round_cuts, args.cuts - r * args.round_cuts)
        run_dir = args.out if rounds == 1 else os.path.join(args.out, f"round-{r + 1:03d}")
        if rounds > 1:
            log(f"power_cut: round {r + 1} of {rounds}: {cuts} cuts")
        try:
            results += run_round(args, cuts, run_dir, args.seed + r)
        except RuntimeError as e:
            # The round's own cuts count as failed (summarize: fewer than
            # wanted); the rounds before keep their results.
            log(f"power_cut: round {r + 1} stopped: {e}")
            if rounds == 1:
                raise
    return summarize(results, args.cuts)


def main():
    ap = argparse.ArgumentParser(description="power cuts of matchbook serve on a loop device")
    ap.add_argument("cuts", type=int, nargs="?", default=20)
    ap.add_argument("--bin", required=True, help="the matchbook binary")
    ap.add_argument("--out", required=True, help="run directory (cuts and acknowledgements)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep-images", action="store_true")
    ap.add_argument("--image-mb", type=int, default=256,
                    help="size of the primary's ext4 image (the journal, snapshots and projection)")
    ap.add_argument("--fsync", default="fsync",
                    help="journal.fsync of the server under test; under none, losses are expected")
    ap.add_argument("--prefill-events", type=int, default=0, metavar="N",
                    help="before the cuts, grow the journal by N events with matchbook-bench "
                         "fill (--prefill-via load: to N records, its durable sequence, with "
                         "matchbook-load through the API)")
    ap.add_argument("--prefill-via", choices=("fill", "load"), default="fill")
    ap.add_argument("--round-cuts", type=int, default=20, metavar="R",
                    help="cuts per round (default 20): each round starts a new primary, so "
                         "a run of thousands of cuts needs the disk and the check time of one "
                         "round (a check reads every acknowledgement of its round: late in a "
                         "100-cut round one took ~12 s, in a 20-cut round ~2 s); a prefill is "
                         "made for each round")
    ap.add_argument("--bench-bin", default=None,
                    help="matchbook-bench for --prefill-events (default: beside --bin)")
    ap.add_argument("--load-bin", default=None,
                    help="matchbook-load for --prefill-via load (default: beside --bin)")
    ap.add_argument("--verify-projection-every", type=int, default=1, metavar="K",
                    help="run `matchbook verify --projection` on every K-th cut (default 1: "
                         "all; 0: none). It reads the whole projection: minutes a cut on a "
                         "journal of millions of records")
    ap.add_argument("--check", metavar="CUT_DIR", help="check one cut directory again")
    args = ap.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 30)

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    try:
        if args.check:
            cut_dir = os.path.abspath(args.check)
            moment_file = os.path.join(cut_dir, "moment")
            moment = open(moment_file).read().strip() if os.path.exists(moment_file) else "load"
            res = check_cut(os.path.abspath(args.bin), cut_dir, moment, True,
                            verify_projection=args.verify_projection_every > 0)
            report(res)
            return summarize([res], 1)
        if args.cuts < 1:
            ap.error("the number of cuts must be at least 1")
        if args.round_cuts < 1:
            ap.error("--round-cuts must be at least 1")
        log(f"power_cut: seed {args.seed}")
        return run(args)
    finally:
        cleanup()


if __name__ == "__main__":
    sys.exit(main())

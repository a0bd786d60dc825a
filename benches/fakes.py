#!/usr/bin/env python3
"""Loopback fakes for benches/daemon.sh (Python 3 standard library only).

Serves, on 127.0.0.1 and free ports:
  * a Telegram Bot API: /bot<token>/getMe, getUpdates (long poll, hands out queued updates,
    real offset semantics), sendMessage (arrival time recorded), sendChatAction, setMyCommands,
    getWebhookInfo, deleteWebhook (anything else answers `true`);
  * an instant OpenAI-compatible model: POST /v1/chat/completions answers at once with a fixed
    short text that echoes the `bench-<n>` tag of the last user message, so the reply can be
    matched to its update.
Control endpoints (on the Telegram port, GET):
  /_ctl/reset_polls          forget getUpdates arrival times
  /_ctl/wait_poll?timeout=S  block until a getUpdates arrived since reset; {"t_ns": ...}
  /_ctl/latency?n=N          push N updates one at a time (next after the previous reply
                             arrived) and return per-stage latencies
  /_ctl/throughput?chats=C&per=P  push C*P updates at once (C chats, P messages each) and
                             return the wall time until every reply arrived
Prints one line `TELEGRAM_PORT=<p> MODEL_PORT=<p>` on stdout once both listen.
All timestamps are time.monotonic_ns() taken inside this process.
"""

import json
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

TOKEN = sys.argv[1] if len(sys.argv) > 1 else "123456:bench-token"
MAX_HOLD = 25.0
TAG = re.compile(r"bench-(\d+)")

lock = threading.Condition()
updates = []           # queued update dicts, ordered by update_id
confirmed_below = 0
next_update_id = 1
poll_times = []        # monotonic_ns of getUpdates arrivals since reset
handed = {}            # tag -> ns the update was first handed out
model_in = {}          # tag -> ns model request received
model_out = {}         # tag -> ns model response written
sent = {}              # tag -> ns sendMessage received
next_message_id = 1000


def now():
    return time.monotonic_ns()


def push(chat_id, text):
    global next_update_id
    uid = next_update_id
    next_update_id += 1
    updates.append({
        "update_id": uid,
        "message": {
            "message_id": uid,
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private", "first_name": "User"},
            "from": {"id": chat_id, "is_bot": False, "first_name": "User", "language_code": "en"},
            "text": text,
        },
    })
    return uid


BOT_ME = {
    "id": 123456, "is_bot": True, "first_name": "Ethan", "username": "ethan_bench_bot",
    "can_join_groups": True, "can_read_all_group_messages": False,
    "supports_inline_queries": False, "can_connect_to_business": False,
    "has_main_web_app": False,
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def setup(self):
        super().setup()
        # One segment per response and no Nagle: otherwise the fake itself adds ~40 ms
        # (Nagle + delayed ACK) and that would be measured as daemon overhead.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def reply(self, code, obj):
        data = json.dumps(obj).encode()
        head = ("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                "Content-Length: %d\r\n\r\n" % (code, self.responses.get(code, ("",))[0],
                                                   len(data))).encode()
        self.wfile.write(head + data)
        self.wfile.flush()

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw.strip():
            q = parse_qs(urlparse(self.path).query)
            return {k: v[0] for k, v in q.items()}
        try:
            return json.loads(raw)
        except ValueError:
            q = parse_qs(raw.decode("utf-8", "replace"))
            return {k: v[0] for k, v in q.items()}

    do_GET = property(lambda self: self.route)
    do_POST = property(lambda self: self.route)

    def route(self):
        path = urlparse(self.path).path
        if path.startswith("/_ctl/"):
            return self.control(path[6:], parse_qs(urlparse(self.path).query))
        if path.rstrip("/").endswith("/chat/completions"):
            return self.model()
        if not path.startswith("/bot"):
            return self.reply(404, {"ok": False, "error_code": 404, "description": "Not Found"})
        token, _, method = path[4:].partition("/")
        if token != TOKEN:
            return self.reply(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
        t = now()
        body = self.body()
        m = method.lower()
        if m == "getme":
            return self.reply(200, {"ok": True, "result": BOT_ME})
        if m == "getupdates":
            return self.get_updates(t, body)
        if m == "sendmessage":
            global next_message_id
            text = str(body.get("text", ""))
            with lock:
                mt = TAG.search(text)
                if mt and mt.group(1) not in sent:
                    sent[mt.group(1)] = t
                    lock.notify_all()
                mid = next_message_id
                next_message_id += 1
            chat_id = int(body.get("chat_id", 0) or 0)
            return self.reply(200, {"ok": True, "result": {
                "message_id": mid, "date": int(time.time()),
                "chat": {"id": chat_id, "type": "private", "first_name": "User"},
                "from": {"id": 123456, "is_bot": True, "first_name": "Ethan",
                         "username": "ethan_bench_bot"},
                "text": text}})
        if m == "getwebhookinfo":
            return self.reply(200, {"ok": True, "result": {
                "url": "", "has_custom_certificate": False, "pending_update_count": 0}})
        return self.reply(200, {"ok": True, "result": True})

    def get_updates(self, t, body):
        global confirmed_below
        try:
            offset = int(body.get("offset")) if body.get("offset") is not None else None
        except (TypeError, ValueError):
            offset = None
        try:
            hold = min(max(float(body.get("timeout", 0) or 0), 0.0), MAX_HOLD)
        except (TypeError, ValueError):
            hold = 0.0
        limit = int(body.get("limit", 100) or 100)
        deadline = time.monotonic() + hold
        with lock:
            poll_times.append(t)
            lock.notify_all()
            if offset is not None and offset > confirmed_below:
                confirmed_below = offset
                while updates and updates[0]["update_id"] < confirmed_below:
                    updates.pop(0)
            while True:
                batch = [u for u in updates if u["update_id"] >= confirmed_below][:limit]
                left = deadline - time.monotonic()
                if batch or left <= 0:
                    break
                lock.wait(left)
        self.reply(200, {"ok": True, "result": batch})
        t_out = now()
        with lock:
            for u in batch:
                mt = TAG.search(u["message"]["text"])
                if mt:
                    handed.setdefault(mt.group(1), t_out)

    def model(self):
        t = now()
        body = self.body()
        tag = None
        for msg in reversed(body.get("messages") or []):
            if msg.get("role") == "user":
                c = msg.get("content")
                if isinstance(c, list):
                    c = " ".join(p.get("text", "") for p in c if isinstance(p, dict))
                mt = TAG.search(c or "")
                tag = mt.group(1) if mt else None
                break
        if tag is not None:
            with lock:
                model_in.setdefault(tag, t)
        text = "ok bench-%s" % tag if tag is not None else "ok"
        self.reply(200, {
            "id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "bench"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}})
        if tag is not None:
            t_out = now()
            with lock:
                model_out.setdefault(tag, t_out)

    def control(self, cmd, q):
        arg = lambda k, d: type(d)(q.get(k, [d])[0])
        if cmd == "reset_polls":
            with lock:
                poll_times.clear()
            return self.reply(200, {"ok": True})
        if cmd == "wait_poll":
            end = time.monotonic() + arg("timeout", 10.0)
            with lock:
                while not poll_times and time.monotonic() < end:
                    lock.wait(end - time.monotonic())
                first = poll_times[0] if poll_times else None
            return self.reply(200, {"t_ns": first})
        if cmd == "now":
            return self.reply(200, {"t_ns": now()})
        if cmd == "latency":
            return self.reply(200, run_latency(arg("n", 1000), arg("timeout", 10.0)))
        if cmd == "throughput":
            return self.reply(200, run_throughput(arg("chats", 200), arg("per", 5),
                                                   arg("timeout", 300.0)))
        return self.reply(404, {"error": "unknown control " + cmd})


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
    return xs[k]


seq = [0]


def fresh_tag():
    seq[0] += 1
    return str(seq[0])


def run_latency(n, timeout):
    """Sequential: one update in flight at a time, all in one chat."""
    tags = []
    for _ in range(n):
        tag = fresh_tag()
        with lock:
            push(900000001, "hello bench-%s" % tag)
            lock.notify_all()
            end = time.monotonic() + timeout
            while tag not in sent and time.monotonic() < end:
                lock.wait(end - time.monotonic())
            if tag not in sent:
                return {"error": "no reply for bench-%s within %ss" % (tag, timeout),
                        "done": len(tags)}
        tags.append(tag)
    time.sleep(0.05)  # let the model handler record its response time
    with lock:
        inbound = [(model_in[t] - handed[t]) / 1e3 for t in tags if t in model_in and t in handed]
        outbound = [(sent[t] - model_out[t]) / 1e3 for t in tags if t in model_out and t in sent]
        total = [(sent[t] - handed[t]) / 1e3 for t in tags if t in handed]
    res = {"n": n}
    for name, xs in (("in", inbound), ("out", outbound), ("total", total)):
        res[name + "_count"] = len(xs)
        res[name + "_p50_us"] = pct(xs, 50)
        res[name + "_p99_us"] = pct(xs, 99)
    return res


def run_throughput(chats, per, timeout):
    tags = []
    with lock:
        t0 = now()
        for i in range(per):
            for c in range(chats):
                tag = fresh_tag()
                tags.append(tag)
                push(910000000 + c, "msg %d bench-%s" % (i, tag))
        lock.notify_all()
        end = time.monotonic() + timeout
        while time.monotonic() < end and not all(t in sent for t in tags):
            lock.wait(min(0.5, end - time.monotonic()))
        done = [sent[t] for t in tags if t in sent]
    last = max(done) if done else t0
    secs = (last - t0) / 1e9
    return {"chats": chats, "per_chat": per, "turns": len(tags), "replied": len(done),
            "seconds": secs, "turns_per_s": (len(done) / secs) if secs > 0 else None}


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


def main():
    tg = Server(("127.0.0.1", 0), Handler)
    model = Server(("127.0.0.1", 0), Handler)
    for s in (tg, model):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print("TELEGRAM_PORT=%d MODEL_PORT=%d" % (tg.server_address[1], model.server_address[1]),
          flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

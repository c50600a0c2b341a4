#!/usr/bin/env python3
"""A second load client for non-streaming POSTs, to check wrk's latency figures against.

One thread per connection, each with its own keep-alive HTTP/1.1 connection, POSTing to one of
SESSIONS sessions at random for DURATION seconds; prints the throughput and the latency
percentiles of every request. The mean must agree with Little's law (connections / throughput);
wrk's histogram once did not. Usage: post_client.py URL KEY CONNECTIONS DURATION SESSIONS
"""
import http.client
import random
import sys
import threading
import time
import urllib.parse

url, key = sys.argv[1], sys.argv[2]
connections, duration, sessions = int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
target = urllib.parse.urlsplit(url)
body = b'{"content":"Hello from the Python client: how do lifetimes work in Rust?"}'
headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
latencies, errors, lock = [], [], threading.Lock()


def worker(seed: int, deadline: float) -> None:
    rng = random.Random(seed)
    conn = http.client.HTTPConnection(target.hostname, target.port)
    mine, failed = [], 0
    while time.monotonic() < deadline:
        path = f"/v1/sessions/session_wrk{rng.randint(1, sessions):013d}/messages"
        start = time.monotonic()
        conn.request("POST", path, body, headers)
        response = conn.getresponse()
        response.read()
        mine.append(time.monotonic() - start)
        failed += response.status // 100 != 2
    with lock:
        latencies.extend(mine)
        errors.append(failed)


deadline = time.monotonic() + duration
threads = [threading.Thread(target=worker, args=(i, deadline)) for i in range(connections)]
began = time.monotonic()
for t in threads:
    t.start()
for t in threads:
    t.join()
elapsed = time.monotonic() - began
latencies.sort()
n = len(latencies)


def at(p: float) -> float:
    return latencies[min(n - 1, int(p / 100 * n))] * 1000


print(f"requests {n} in {elapsed:.2f} s = {n / elapsed:.0f}/s; non-2xx {sum(errors)}")
print(f"latency mean {sum(latencies) / n * 1000:.2f} ms, p50 {at(50):.2f} ms, p90 {at(90):.2f} ms, "
      f"p99 {at(99):.2f} ms, max {latencies[-1] * 1000:.2f} ms; "
      f"Little's law mean {connections / (n / elapsed) * 1000:.2f} ms")

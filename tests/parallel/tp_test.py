#!/usr/bin/env python3
"""Tensor parallelism is bitwise: `mpirun -np N lift serve --tp N` answers exactly what one rank
answers (text, token ids, logprobs and top-5 alternatives, greedy and seeded sampling), for
every model in ../shared/models/archs and ../shared/models/quantized, at 2 and 4 ranks, and
with speculative decoding (n-gram, draft model) at 2 ranks what one rank answers without. And a
follower killed with SIGKILL, or stopped with SIGSTOP, ends the job instead of leaving a hung
server; the follower of an idle server takes next to no CPU.

Usage: tp_test.py LIFT_BINARY [MODEL ...]   (run from the repository root; needs mpirun)
"""
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(ROOT, "..", "shared", "models")
PROMPT = "Once upon a time, in a small village by the sea,"
REQUESTS = [
    {"max_tokens": 12, "temperature": 0, "logprobs": 5},
    {"max_tokens": 12, "temperature": 0.9, "top_p": 0.95, "seed": 11, "logprobs": 5},
    # Parallel samples share the prompt's blocks and fork them (copy-on-write on every rank).
    {"max_tokens": 10, "temperature": 0.8, "seed": 5, "n": 3, "logprobs": 2},
]


def fail(msg):
    print(f"tp_test: FAIL: {msg}", flush=True)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, body, timeout=300):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def serve(lift, model, ranks, log, extra=()):
    port = free_port()
    cmd = [lift, "serve", "-m", model, "--host", "127.0.0.1", "--port", str(port), "-t", "1",
           "--served-model-name", "m", "--max-seqs", "4", "-c", "256"] + list(extra)
    if ranks > 1:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
               "--mca", "mpi_yield_when_idle", "1", "-np", str(ranks)] + cmd + \
            ["--tp", str(ranks)]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            return proc, None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc, port
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.1)
    return proc, None


def leader_pid(mpirun_pid):
    """Rank 0 among mpirun's children (their environment names their rank)."""
    return rank_pid(mpirun_pid, 0)


def stop(proc, ranks):
    # SIGTERM to rank 0 drains it, and it ends the followers; mpirun itself turns a SIGTERM
    # into killing the whole job.
    pid = leader_pid(proc.pid) if ranks > 1 else proc.pid
    if pid is None:
        fail("cannot find rank 0 among mpirun's children")
    os.kill(pid, 15)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
    return proc.returncode


def accepted_tokens(port):
    """lift:spec_decode_num_accepted_tokens_total from /metrics (summed over labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("lift:spec_decode_num_accepted_tokens_total"))


def answers(lift, model, ranks, work, extra=(), requests=REQUESTS, tag="", accepted=None):
    log_path = os.path.join(work, f"{os.path.basename(model)}-{ranks}{tag}.log")
    with open(log_path, "wb") as log:
        proc, port = serve(lift, model, ranks, log, extra)
        if port is None:
            os.killpg(proc.pid, 9)
            proc.wait()
            fail(f"{model} with {ranks} ranks did not start:\n" + open(log_path).read()[-3000:])
        try:
            out = []
            for body in requests:
                r = post(port, dict(body, model="m", prompt=PROMPT))
                if len(r["choices"]) != body.get("n", 1):
                    fail(f"{model}: {len(r['choices'])} choices for n = {body.get('n', 1)}")
                for c in sorted(r["choices"], key=lambda c: c["index"]):
                    if not c.get("logprobs") or not c["logprobs"].get("token_logprobs"):
                        fail(f"{model}: no logprobs in the answer {r}")
                    out.append({"text": c["text"], "logprobs": c["logprobs"],
                                "finish_reason": c["finish_reason"]})
            if accepted is not None:
                accepted.append(accepted_tokens(port))
        finally:
            code = stop(proc, ranks)
        if code != 0:
            fail(f"{model} with {ranks} ranks exited {code}:\n" + open(log_path).read()[-3000:])
        return out


def rank_pid(mpirun_pid, rank):
    for child in subprocess.run(["pgrep", "-P", str(mpirun_pid)], capture_output=True,
                                text=True).stdout.split():
        try:
            with open(f"/proc/{child}/environ", "rb") as f:
                if f"OMPI_COMM_WORLD_RANK={rank}\0".encode() in f.read():
                    return int(child)
        except OSError:
            pass
    return None


def check_lost_follower(lift, model, work, sig):
    """A follower killed (SIGKILL: mpirun aborts the job) or stopped (SIGSTOP: the leader's
    next exchange times out after --tp-timeout and aborts it, naming the exchange) ends the
    job, with the request in flight unanswered, instead of leaving a hung server."""
    name = "killed" if sig == signal.SIGKILL else "stopped"
    log_path = os.path.join(work, f"{name}-follower.log")
    with open(log_path, "wb") as log:
        proc, port = serve(lift, model, 2, log, ["--tp-timeout", "3"])
        follower = rank_pid(proc.pid, 1) if port is not None else None
        if follower is None:
            os.killpg(proc.pid, 9)
            fail(f"the 2-rank server did not start, or has no rank 1:\n{open(log_path).read()}")
        os.kill(follower, sig)
        try:
            post(port, {"model": "m", "prompt": PROMPT, "max_tokens": 4}, timeout=30)
            answered = True
        except (OSError, urllib.error.URLError):
            answered = False
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            fail(f"the job outlived its {name} follower by 30 s (a hung server)")
    text = open(log_path, errors="replace").read()
    if answered or proc.returncode == 0 or \
            (sig == signal.SIGSTOP and "another rank hangs" not in text):
        fail(f"a {name} follower: answered={answered}, exit {proc.returncode}:\n{text[-2000:]}")
    print(f"tp_test: a {name} follower ended the job", flush=True)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def check_idle_follower(lift, model, work):
    """A follower of an idle server sleeps between its polls for the next pass: it used to
    poll a core at 100% for as long as the server ran."""
    log_path = os.path.join(work, "idle-follower.log")
    with open(log_path, "wb") as log:
        proc, port = serve(lift, model, 2, log)
        try:
            follower = rank_pid(proc.pid, 1) if port is not None else None
            if follower is None:
                fail(f"the 2-rank server did not start, or has no rank 1:\n{open(log_path).read()}")
            post(port, {"model": "m", "prompt": PROMPT, "max_tokens": 4})
            time.sleep(0.5)
            before, t0 = cpu_seconds(follower), time.time()
            time.sleep(3)
            share = (cpu_seconds(follower) - before) / (time.time() - t0)
            # A poll every 0.5 ms costs a few percent; anything near a whole core is the spin.
            if share > 0.25:
                fail(f"an idle server's follower used {100 * share:.0f}% of a core")
            # And the next request is answered as before.
            post(port, {"model": "m", "prompt": PROMPT, "max_tokens": 4})
        finally:
            code = stop(proc, 2)
    if code != 0:
        fail(f"the 2-rank server exited {code}:\n{open(log_path).read()[-3000:]}")
    print(f"tp_test: an idle server's follower used {100 * share:.1f}% of a core", flush=True)


def check_speculation(lift, work):
    """Speculation runs with tensor parallelism: n-gram lookup and a draft model (whole, on the
    leader) at 2 ranks answer bitwise what one rank answers without speculation (greedy; n-gram
    sampling too, as its proposals are point masses)."""
    stories = os.path.join(SHARED, "stories260K")
    model = os.path.join(stories, "stories260K.gguf")
    # A prompt that repeats, so that n-gram lookup finds continuations.
    prompt = "Tom had a red ball. Tom had a red ball. Tom had a red ball."
    greedy = [{"max_tokens": 40, "temperature": 0, "logprobs": 3, "prompt": prompt}]
    sampled = greedy + [{"max_tokens": 40, "temperature": 0.9, "seed": 3, "logprobs": 3,
                         "prompt": prompt}]
    plain = answers(lift, model, 1, work, ["--spec", "off"], sampled, "-plain")
    cases = [(["--spec", "ngram", "--spec-tokens", "4", "--spec-fixed"], sampled, "-ngram"),
             (["--spec", "draft", "--draft-model",
               os.path.join(stories, "stories260K-draft-L4.gguf"), "--spec-tokens", "3",
               "--spec-fixed"], greedy, "-draft")]
    for extra, requests, tag in cases:
        accepted = []
        got = answers(lift, model, 2, work, extra, requests, tag, accepted)
        if not accepted or accepted[0] <= 0:
            fail(f"--tp 2 {' '.join(extra)}: no draft token was accepted: nothing speculated")
        for i, (a, b) in enumerate(zip(plain, got)):
            if a != b:
                fail(f"--tp 2 {' '.join(extra)}: request {i} differs from one rank without "
                     f"speculation:\n  plain: {json.dumps(a)[:600]}\n  spec: {json.dumps(b)[:600]}")
        print(f"tp_test: --tp 2 {tag[1:]} speculation ({accepted[0]:.0f} draft tokens accepted) "
              f"bitwise one rank's plain answers", flush=True)


def main():
    if len(sys.argv) < 2:
        fail("usage: tp_test.py LIFT_BINARY [MODEL ...]")
    lift = os.path.abspath(sys.argv[1])
    if shutil.which("mpirun") is None:
        fail("mpirun not found (scripts/bootstrap.sh installs openmpi-bin)")
    models = sys.argv[2:] or sorted(glob.glob(os.path.join(SHARED, "archs", "*.gguf")) +
                                    glob.glob(os.path.join(SHARED, "quantized", "*.gguf")))
    if not models:
        fail(f"no models under {SHARED}")
    work = tempfile.mkdtemp(prefix="lift-tp-")
    try:
        for model in models:
            t0 = time.time()
            one = answers(lift, model, 1, work)
            for ranks in (2, 4):
                many = answers(lift, model, ranks, work)
                for i, (a, b) in enumerate(zip(one, many)):
                    if a != b:
                        fail(f"{os.path.basename(model)}: request {i} with {ranks} ranks differs "
                             f"from one rank:\n  1: {json.dumps(a)[:600]}\n  {ranks}: "
                             f"{json.dumps(b)[:600]}")
            print(f"tp_test: {os.path.basename(model)}: 2 and 4 ranks bitwise one rank's "
                  f"({time.time() - t0:.1f} s)", flush=True)
        check_speculation(lift, work)
        check_idle_follower(lift, models[0], work)
        check_lost_follower(lift, models[0], work, signal.SIGKILL)
        check_lost_follower(lift, models[0], work, signal.SIGSTOP)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"tp_test: all {len(models)} models passed", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Turns what bench/run-peers collected into bench/results.json and
bench/RESULTS.md.

Input (the run's work directory):
  meta.txt      key=value facts about the machine and the run
  notes.txt     one line per skipped peer, failed run or warning
  manifest.tsv  one line per run: rep, path, kind, stack, size, status, log,
                server command, client command; the kinds paired-* are the
                short runs paired by the machine's mode (paired-probe the
                probes between them), read in manifest order
  logs/         each run's output

Five kinds of output are read:
  datd   datbench --json (bench/datbench/): one JSON document, {"tool":
         "datbench", ..., "results": [...]}, among the lines its server
         printed on stderr
  datctl lines "name=datctl_ep_list mode=json|table eps=... seconds=..."
  floor  lines "name=... mode=... size=... half_rtt_us_median=..." (bench/floor/)
  fi     fi_pingpong's table: the client's last line, usec/xfer = half round
         trip averaged over the run (fi_pingpong prints no percentiles)
  ucx    ucx_perftest -f -v CSV: "label,iterations,P_percentile_lat,avg_lat,
         overall_lat,avg_bw,overall_bw,avg_mr,overall_mr" with our labels
         "measure-size"; the percentile is the header's (-R 50 or -R 99),
         taken by ucx_perftest over its last 2048 iterations

Every number is the median over the repetitions of that run's median (or
p99).  The "datd" rows fill the datd columns (an em dash where datbench did
not run or failed), and the targets of issue 7 are judged from them.
"""
import argparse
import json
import os
import re
import statistics
import sys

LAT_SIZES = [8, 64, 1024, 4096, 65536, 1048576]
DASH = "\u2014"

MEASURES = [
    # id, title, unit, better
    ("lat_send", "Latency: send/recv ping-pong (half round trip, \u00b5s)", "us", "lower"),
    ("lat_write", "Latency: RDMA-write ping-pong (half round trip, \u00b5s)", "us", "lower"),
    ("bw_write", "Bandwidth: RDMA write, streaming (GB/s)", "gbps", "higher"),
    ("bw_read", "Bandwidth: RDMA read, streaming (GB/s)", "gbps", "higher"),
    ("bw_send", "Bandwidth: send, streaming (GB/s)", "gbps", "higher"),
    ("conn", "Connection rate: connect \u2192 established, 64 B private data each way, "
             "disconnect (connections/s; p99 = \u00b5s per connection)", "cps", "higher"),
]
PATHS = [("same", "same host"), ("cross", "across hosts (two network namespaces, veth)")]

SHM_FLOOR = "floor: shm, copy in + copy out, spinning"
FUTEX_FLOOR = "floor: shm, futex wait/wake every hop"


def floor_targets(path, name, mode):
    """(measure, wait, stack) rows one floor output line feeds."""
    tcp = "raw TCP loopback" if path == "same" else "raw TCP over veth"
    wait = {"busy": "poll", "block": "block"}.get(mode, "-")
    table = {
        "shm_pingpong": [("lat_send", wait, SHM_FLOOR if wait == "poll" else FUTEX_FLOOR),
                         ("lat_write", wait, SHM_FLOOR if wait == "poll" else FUTEX_FLOOR)],
        "unix_pingpong": [("lat_send", wait, "AF_UNIX stream")],
        "tcp_pingpong": [("lat_send", wait, tcp)]
        + ([("lat_write", wait, tcp + " (the floor)")] if path == "cross" else []),
        "memcpy": [("bw_write", "-", "floor: memcpy, one process"),
                   ("bw_read", "-", "floor: memcpy, one process")],
        "vm_writev": [("bw_write", "-", "floor: process_vm_writev")],
        "vm_readv": [("bw_read", "-", "floor: process_vm_readv")],
        "shm_stream": [("bw_send", "-", "floor: shm ring, copy in + copy out")],
        "unix_stream": [("bw_send", wait, "AF_UNIX stream")],
        "tcp_stream": [("bw_send", wait, tcp)]
        + ([("bw_write", wait, tcp + " streaming (the floor)"),
            ("bw_read", wait, tcp + " streaming (the floor)")] if path == "cross" else []),
        "tcp_connect": [("conn", mode, tcp + ": connect + accept + 64 B each way")],
        "unix_connect": [("conn", mode, "AF_UNIX: connect + accept + 64 B each way")],
    }
    return table.get(name, [])


DATD_MEASURES = {"send_lat": "lat_send", "write_lat": "lat_write", "write_bw": "bw_write",
                 "read_bw": "bw_read", "send_bw": "bw_send", "connect": "conn"}


def datbench_doc(text):
    """The JSON document datbench --json printed, or None."""
    start = text.find('{"tool": "datbench"')
    if start < 0:
        return None
    end = text.find("\n]}", start)
    end = text.find("]}", start) if end < 0 else end + 1
    try:
        return json.loads(text[start:end + 2])
    except ValueError:
        return None


DATD_NOTES = []

# datbench --shared-mem: datd on memory libdat provides (shared memory the
# peer maps: on shm its RDMA Writes go straight in), as UCX's put goes to
# memory UCX allocates.  A stack of its own beside "datd".
DATD_SHARED = "datd, shared memory (datbench --shared-mem)"


def parse_datd(path, text):
    """Rows for the tables (measure, wait, "datd" or DATD_SHARED, size,
    median, p99), and scale values {name: value}."""
    doc = datbench_doc(text)
    rows, values = [], {}
    if not doc:
        return rows, values
    stack = DATD_SHARED if doc.get("memory") == "shared" else "datd"
    for r in doc.get("results", []):
        name = r.get("name")
        if name in DATD_MEASURES:
            measure = DATD_MEASURES[name]
            if measure == "conn":
                rows.append((measure, r["mode"], "datd", r["clients"], r["conn_per_s"], r["conn_us_p99"]))
                if r.get("failed"):
                    DATD_NOTES.append("datbench conn (%s, %d client%s): %d of %d connections failed "
                                      "(not counted in the rate; see the log)" % (
                                          "same host" if path == "same" else "across hosts", r["clients"],
                                          "" if r["clients"] == 1 else "s", r["failed"],
                                          r["failed"] + r["conns"]))
            elif measure.startswith("lat"):
                rows.append((measure, r["mode"], stack, r["size"], r["half_rtt_us_median"],
                             r["half_rtt_us_p99"]))
            else:
                # Streaming in both ways of waiting (datbench bw -m); an
                # older datbench only polled and said "-".
                wait = r.get("mode", "-")
                rows.append((measure, "poll" if wait == "-" else wait, stack, r["size"],
                             r["gbps_median"], r["gbps_p99"]))
        elif "value" in r and r.get("count", 0) > 0 or name == "datd_rss":
            values[name] = (r["value"], r.get("count", 0))
    return rows, values


def parse_kv(line):
    return dict(f.split("=", 1) for f in line.split() if "=" in f)


def parse_floor(path, text):
    out = []
    for line in text.splitlines():
        if not line.startswith("name="):
            continue
        kv = parse_kv(line)
        for measure, wait, stack in floor_targets(path, kv["name"], kv.get("mode", "-")):
            if measure == "conn":
                size = int(kv["clients"])
                med, p99 = float(kv["conn_per_s"]), float(kv["conn_us_p99"])
            elif "half_rtt_us_median" in kv:
                size = int(kv["size"])
                med, p99 = float(kv["half_rtt_us_median"]), float(kv["half_rtt_us_p99"])
            else:
                size = int(kv["size"])
                med, p99 = float(kv["gbps_median"]), float(kv["gbps_p99"])
            out.append((measure, wait, stack, size, med, p99))
    return out


FI_LINE = re.compile(r"^\s*(\S+)\s+(\S+)\s+=?(\S+)\s+(\S+)\s+(\S+)s\s+(\S+)\s+(\S+)\s+(\S+)\s*$")


def parse_fi(path, stack_id, size, text):
    prov = stack_id.split("-", 1)[1]
    label = "libfabric %s (fi_pingpong -p %s -e %s)" % (prov, prov, "rdm" if prov == "shm" else "msg")
    usec = None
    for line in text.splitlines():
        m = FI_LINE.match(line)
        if m and m.group(1) != "bytes":
            try:
                usec = float(m.group(7))
            except ValueError:
                pass
    if usec is None or usec <= 0:
        return []
    out = []
    if size in LAT_SIZES:
        out.append(("lat_send", "poll", label + ", mean", size, usec, None))
    if size >= 65536:
        out.append(("bw_send", "-", label + ": ping-pong, size \u00f7 half round trip",
                    size, size / (usec * 1e3), None))
    return out


def parse_ucx(stack_id, text):
    tls = stack_id.split("-", 1)[1].replace("+", ",")
    label = "UCX (ucx_perftest, UCX_TLS=%s)" % tls
    tests = {"lat_send": "tag_lat", "lat_write": "ucp_put_lat", "bw_send": "tag_bw",
             "bw_write": "ucp_put_bw", "bw_read": "ucp_get"}
    pct = 50.0
    rows = {}
    for line in text.splitlines():
        m = re.search(r"(\d+(?:\.\d+)?)_percentile_lat", line)
        if m:
            pct = float(m.group(1))
            continue
        f = [x.strip() for x in line.split(",")]
        if len(f) != 9 or "-" not in f[0]:
            continue
        measure, size = f[0].rsplit("-", 1)
        if measure not in tests:
            continue
        try:
            lat, bw_mib = float(f[2]), float(f[6])
        except ValueError:
            continue
        stack = "%s %s" % (label, tests[measure])
        if measure.startswith("lat"):
            rows[(measure, stack, int(size))] = (lat, pct)
        elif pct == 50.0:
            # ucx_perftest's MB is 2^20 bytes.
            rows[(measure, stack, int(size))] = (bw_mib * 1048576 / 1e9, None)
    out = []
    for (measure, stack, size), (v, p) in rows.items():
        wait = "poll" if measure.startswith("lat") else "-"
        if p is None:
            out.append((measure, wait, stack, size, v, None))
        elif p >= 99:
            out.append((measure, wait, stack, size, None, v))
        else:
            out.append((measure, wait, stack, size, v, None))
    return out


def read_meta(work):
    meta = {}
    with open(os.path.join(work, "meta.txt")) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                meta[k] = v
    return meta


def parse_rows(kind, path, stack_id, size, text):
    """A run's rows (measure, wait, stack, size, median, p99) by the kind of
    its output, and datbench's scale values {name: (value, count)}."""
    if kind == "floor":
        return parse_floor(path, text), {}
    if kind == "fi":
        return parse_fi(path, stack_id, int(size), text), {}
    if kind == "ucx":
        return parse_ucx(stack_id, text), {}
    if kind == "datd":
        return parse_datd(path, text)
    return [], {}


def collect(work):
    """{(path, measure, wait, stack, size): {"median": [...], "p99": [...]}}, the
    runs, and datd's scale {(stack, name): [values]}."""
    samples, runs, scale = {}, [], {}
    with open(os.path.join(work, "manifest.tsv")) as f:
        for line in f:
            rep, path, kind, stack_id, size, rc, log, scmd, ccmd = line.rstrip("\n").split("\t")
            runs.append({"rep": int(rep), "path": path, "kind": kind, "stack": stack_id,
                         "size": size, "status": int(rc), "server": scmd, "client": ccmd})
            try:
                with open(log, errors="replace") as lf:
                    text = lf.read()
            except OSError:
                continue
            rows, values = parse_rows(kind, path, stack_id, size, text)
            if kind == "datd":
                try:
                    with open(log[:-len(".log")] + ".server.log", errors="replace") as sf:
                        text += sf.read()
                except OSError:
                    pass
                lost = text.count("# server: connection failed")
                if lost:
                    DATD_NOTES.append("datbench %s (%s): %d connection%s failed on the server's side "
                                      "(DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR or BROKEN) although "
                                      "the client's side saw ESTABLISHED or a failure (see the log)" % (
                                          stack_id, "same host" if path == "same" else "across hosts",
                                          lost, "" if lost == 1 else "s"))
                for name, (v, count) in values.items():
                    scale.setdefault((stack_id, name), []).append((v, count))
            elif kind == "datctl":
                for line in text.splitlines():
                    if line.startswith("name="):
                        kv = parse_kv(line)
                        scale.setdefault((stack_id, "%s_%s" % (kv["name"], kv["mode"])), []).append(
                            (float(kv["seconds"]), int(kv["eps"])))
            for measure, wait, stack, sz, med, p99 in rows:
                s = samples.setdefault((path, measure, wait, stack, sz), {"median": [], "p99": []})
                if med is not None:
                    s["median"].append(med)
                if p99 is not None:
                    s["p99"].append(p99)
    return samples, runs, scale


# The paired runs (run-peers' paired_same and paired_cross): short runs of
# each stack, each between two probes (the floor's 8 B ping-pong), in
# manifest order.  A probe within PAIRED_FAST_MAX of the run's fastest probe
# says the fast mode, one from PAIRED_SLOW_MIN times it on the slow mode (the
# two are about 4x apart on this VM); a run counts in a mode only when both
# its probes say that mode.
PAIRED_FAST_MAX = 1.6
PAIRED_SLOW_MIN = 2.5
MODES = ("fast", "slow")


def probe_value(text):
    for line in text.splitlines():
        if line.startswith("name=shm_pingpong"):
            kv = parse_kv(line)
            if kv.get("mode") == "busy" and "half_rtt_us_median" in kv:
                return float(kv["half_rtt_us_median"])
    return None


def collect_paired(work):
    """({(mode, path, measure, wait, stack, size): [run medians]}, {mode: [probe medians]})."""
    seq = []
    with open(os.path.join(work, "manifest.tsv")) as f:
        for line in f:
            rep, path, kind, stack_id, size, rc, log, scmd, ccmd = line.rstrip("\n").split("\t")
            if not kind.startswith("paired-"):
                continue
            try:
                with open(log, errors="replace") as lf:
                    text = lf.read()
            except OSError:
                text = ""
            kind = kind[len("paired-"):]
            if kind == "probe":
                seq.append(("probe", probe_value(text) if rc == "0" else None))
                continue
            seq.append(("run", path, parse_rows(kind, path, stack_id, size, text)[0] if rc == "0" else []))
    probes = [e[1] for e in seq if e[0] == "probe" and e[1]]
    values, probe_modes = {}, {m: [] for m in MODES}
    if not probes:
        return values, probe_modes
    lo = min(probes)

    def mode_of(v):
        if not v:
            return None
        return "fast" if v <= PAIRED_FAST_MAX * lo else "slow" if v >= PAIRED_SLOW_MIN * lo else None

    for v in probes:
        if mode_of(v):
            probe_modes[mode_of(v)].append(v)
    for i, e in enumerate(seq):
        if e[0] != "run" or i == 0 or i + 1 >= len(seq) or seq[i - 1][0] != "probe" or seq[i + 1][0] != "probe":
            continue
        mode = mode_of(seq[i - 1][1])
        if mode is None or mode != mode_of(seq[i + 1][1]):
            continue
        for measure, wait, stack, sz, m, _ in e[2]:
            # The raw TCP floors stand for RDMA too in the main tables;
            # the paired targets compare sends only.
            if m is not None and not stack.endswith("(the floor)"):
                values.setdefault((mode, e[1], measure, wait, stack, sz), []).append(m)
    return values, probe_modes


def med(values):
    return statistics.median(values) if values else None


def fmt(v, unit):
    if v is None:
        return "n/a"
    if unit == "cps":
        return "%.0f" % v
    if v >= 100:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    if v >= 1:
        return "%.2f" % v
    return "%.3f" % v


def size_label(size, measure):
    if measure == "conn":
        return "%d client%s" % (size, "" if size == 1 else "s concurrent")
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return "%d MiB" % (size >> 20)
    if size >= 1024 and size % 1024 == 0:
        return "%d KiB" % (size >> 10)
    return "%d B" % size


WAIT_LABEL = {"poll": "polling", "block": "blocking", "-": ""}
WAIT_ORDER = {"poll": 0, "-": 0, "seq": 0, "block": 1, "conc": 1}


def table(results, path, measure, unit, better):
    rows = [r for r in results if r["path"] == path and r["measure"] == measure and r["stack"] != "datd"]
    if not rows:
        return []
    datd = {(r["wait"], r["size"]): r for r in results
            if r["path"] == path and r["measure"] == measure and r["stack"] == "datd"}
    ratio_note = "below 1: datd is faster" if better == "lower" else "above 1: datd is faster"
    conn = measure == "conn"
    if conn:
        lines = ["| clients | peer | conn/s | p99 \u00b5s per conn | datd conn/s | datd p99 | datd \u00f7 peer (%s) |"
                 % ratio_note, "|---|---|--:|--:|--:|--:|--:|"]
    else:
        lines = ["| size | peer | wait | median | p99 | datd median | datd p99 | datd \u00f7 peer (median; %s) |"
                 % ratio_note, "|---|---|---|--:|--:|--:|--:|--:|"]
    order = {}
    for r in rows:
        order.setdefault(r["stack"], len(order))
    rows.sort(key=lambda r: (r["size"], WAIT_ORDER.get(r["wait"], 9), order[r["stack"]]))
    p99_unit = "us" if conn else unit
    for r in rows:
        # A peer with no way of waiting (streaming, copying) stands beside
        # datd's every way: a line for each.
        waits = [r["wait"]]
        if r["wait"] == "-" and ("-", r["size"]) not in datd:
            waits = [w for w in ("poll", "block") if (w, r["size"]) in datd] or ["-"]
        for w in waits:
            d = datd.get((w, r["size"]))
            dm = d["median"] if d else None
            ratio = DASH
            if dm is not None and r["median"]:
                ratio = "%.2f" % (dm / r["median"])
            p99 = fmt(r["p99"], p99_unit)
            # Latency percentiles taken from separate runs (ucx_perftest) can cross on a busy machine.
            if better == "lower" and r["p99"] is not None and r["median"] is not None and r["p99"] < r["median"]:
                p99 += " *"
            cells = [size_label(r["size"], measure), r["stack"]]
            if not conn:
                cells.append(WAIT_LABEL.get(w, w) + (" (datd)" if w != r["wait"] else ""))
            cells += [fmt(r["median"], unit), p99, fmt(dm, unit) if d else DASH,
                      fmt(d["p99"], p99_unit) if d else DASH, ratio]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


DAPL_UCM_CPS = 13900.0  # DAPL's published rate for ucm on InfiniBand (issue 7), not measured here
TCP_LAT = "raw TCP over veth"


def lookup(results, path, measure, wait, stack, size, key="median"):
    for r in results:
        if (r["path"], r["measure"], r["wait"], r["stack"], r["size"]) == (path, measure, wait, stack, size):
            if key == "best":
                # The lowest: for latencies only (the best of a rate is its highest).
                assert r["unit"] == "us", "best repetition of a %s" % r["unit"]
                return min(r["reps_median"]) if r["reps_median"] else None
            return r[key]
    return None


def stack_named(stacks, prefix, suffix):
    """The first of stacks (names) starting with prefix and ending with suffix:
    UCX's tests ("UCX", " tag_lat"), fi_pingpong's latency ("libfabric", ", mean")."""
    return next((s for s in stacks if s.startswith(prefix) and s.endswith(suffix)), None)


def scale_value(scale, stack, name):
    v = scale.get((stack, name))
    return med([x for x, _ in v]) if v else None


def verdict(value, bar, lower_is_better):
    """("met"/"missed"/"not measured", how much) for value against bar."""
    if value is None or bar is None:
        return "not measured", DASH
    if lower_is_better:
        if value <= bar:
            return "**met**", "%.0f%% under the bar" % (100 * (1 - value / bar)) if bar else DASH
        return "**missed**", "%.0f%% over the bar (%.2f\u00d7 it)" % (100 * (value / bar - 1), value / bar)
    if value >= bar:
        return "**met**", "%.0f%% above the bar" % (100 * (value / bar - 1)) if bar else DASH
    return "**missed**", "%.0f%% below the bar (%.2f\u00d7 it)" % (100 * (1 - value / bar), value / bar)


def targets(results, scale, paired):
    """Rows: (target, datd, bar, verdict, by how much)."""
    rows = []

    def add(what, value, bar, unit, lower, bar_text):
        v, how = verdict(value, bar, lower)
        rows.append((what, fmt(value, unit) + " " + unit_label(unit) if value is not None else DASH,
                     bar_text % (fmt(bar, unit) + " " + unit_label(unit)) if bar is not None
                     else bar_text % DASH, v, how))

    # Same-host latency on the median of the repetitions, and on the runs
    # paired by the machine's mode.  This VM moves between a fast and a slow
    # mode every few seconds, every stack and the floor alike (the placement
    # of its two vCPUs): the medians can compare a stack's slow mode with
    # another's fast one; the paired runs compare each mode with itself.
    # The floor of the medians is the fastest a cache line goes back and
    # forth on this machine: its best repetition, as a repetition in the
    # slow mode is no floor (a median floor of 0.24 us once made 0.29
    # "met"); in a mode, the floor is that mode's probes.
    def shm_targets(how, floor, latency, stacks):
        """The four 8 B shm targets, latency(measure, stack) from the runs
        judged, stacks the names of those runs' stacks."""
        # RDMA Writes on shared memory libdat provides, where measured: like
        # UCX's put, into memory the peer maps (datd's Writes into the
        # consumer's own memory are in the tables, the "datd" columns).
        write = DATD_SHARED if latency("lat_write", DATD_SHARED) is not None else "datd"
        write_how = how + ("; datd on shared memory" if write == DATD_SHARED else "")
        for measure, name, stack, judged in (("lat_send", "send/recv", "datd", how),
                                             ("lat_write", "RDMA write", write, write_how)):
            add("shm: 8 B %s half round trip (%s) within 2\u00d7 the cache-line floor" % (name, judged),
                latency(measure, stack), 2 * floor if floor else None, "us", True,
                "\u2264 %s (2 \u00d7 the floor)")
        peers = [latency("lat_send", s) for s in
                 (stack_named(stacks, "libfabric", ", mean"), stack_named(stacks, "UCX", " tag_lat")) if s]
        peers = [p for p in peers if p is not None]
        add("shm: 8 B send/recv (%s) no slower than the best of libfabric shm and UCX" % how,
            latency("lat_send", "datd"), min(peers) if peers else None, "us", True,
            "\u2264 %s (the best of them)")
        put = stack_named(stacks, "UCX", " ucp_put_lat")
        add("shm: 8 B RDMA write (%s) no slower than UCX's put" % write_how,
            latency("lat_write", write), latency("lat_write", put) if put else None, "us", True, "\u2264 %s")

    shm_targets("polling", lookup(results, "same", "lat_send", "poll", SHM_FLOOR, 8, "best"),
                lambda measure, stack: lookup(results, "same", measure, "poll", stack, 8),
                [r["stack"] for r in results if r["path"] == "same"])
    values, probe_modes = paired
    for mode in MODES:
        floor = med(probe_modes[mode])
        if floor is None:
            continue
        how = "polling, runs paired by the machine's mode: %s, floor %s \u00b5s" % (mode, fmt(floor, "us"))

        def pv(path, measure, stack, size, wait="poll"):
            return med(values.get((mode, path, measure, wait, stack, size), []))

        shm_targets(how, floor, lambda measure, stack: pv("same", measure, stack, 8),
                    [k[4] for k in values if k[0] == mode and k[1] == "same"])
        for size in (8, 64, 1024, 4096):
            tcp = pv("cross", "lat_send", TCP_LAT, size)
            add("tcp: %s send/recv (%s) within 10%% of raw TCP ping-pong" % (size_label(size, "lat_send"), how),
                pv("cross", "lat_send", "datd", size), 1.1 * tcp if tcp else None, "us", True, "\u2264 %s")
        tcp = pv("cross", "bw_send", TCP_LAT, 65536)
        add("tcp: 64 KiB send streaming (%s; raw TCP polling too) \u2265 90%% of raw TCP streaming" % how,
            pv("cross", "bw_send", "datd", 65536), 0.9 * tcp if tcp else None, "gbps", False, "\u2265 %s")
    vmw = lookup(results, "same", "bw_write", "-", "floor: process_vm_writev", 1048576)
    add("shm: 1 MiB RDMA write \u2265 90% of process_vm_writev",
        lookup(results, "same", "bw_write", "poll", "datd", 1048576), 0.9 * vmw if vmw else None, "gbps", False,
        "\u2265 %s")
    # The veth path has the same two modes (raw TCP at 3.9 or 6.1 us a few
    # seconds apart): the paired runs above compare each mode with itself.
    for size in (8, 64, 1024, 4096):
        tcp = lookup(results, "cross", "lat_send", "poll", TCP_LAT, size)
        add("tcp: %s send/recv (polling) within 10%% of raw TCP ping-pong" % size_label(size, "lat_send"),
            lookup(results, "cross", "lat_send", "poll", "datd", size), 1.1 * tcp if tcp else None,
            "us", True, "\u2264 %s")
    for measure, name, stack in (("bw_send", "send", TCP_LAT),
                                 ("bw_write", "RDMA write", TCP_LAT + " streaming (the floor)"),
                                 ("bw_read", "RDMA read", TCP_LAT + " streaming (the floor)")):
        for size in (65536, 1048576, 16777216):
            # Like for like: datd sleeping in dat_evd_wait against the raw
            # TCP program sleeping in send and recv, datd polling against
            # it retrying non-blocking calls (a CPU that never sleeps costs
            # the other's streaming on a VM: bench/README.md).
            for wait, how in (("block", "blocking waits, raw TCP blocking too"),
                              ("poll", "polling, raw TCP polling too")):
                tcp = lookup(results, "cross", measure, wait, stack, size)
                add("tcp: %s %s streaming (%s) \u2265 90%% of raw TCP streaming" % (
                    size_label(size, measure), name, how),
                    lookup(results, "cross", measure, wait, "datd", size), 0.9 * tcp if tcp else None, "gbps",
                    False, "\u2265 %s")
    conc = lookup(results, "same", "conn", "conc", "datd", 8)
    add("connections: \u2265 50 000 established per second on one host (8 clients)", conc, 50000.0, "cps",
        False, "\u2265 %s")
    add("connections: \u2265 3.5\u00d7 DAPL's published ucm rate (13.9k/s, InfiniBand)", conc,
        3.5 * DAPL_UCM_CPS, "cps", False, "\u2265 %s")
    add("datd: \u2264 2 KiB per endpoint (resident set)", scale_value(scale, "datd-scale-eps", "datd_rss_per_ep"),
        2048.0, "bytes", True, "\u2264 %s")
    for mode in ("json", "table"):
        add("datd: `datctl%s ep list` with 100 000 endpoints under 1 s" % (" --json" if mode == "json" else ""),
            scale_value(scale, "datctl-ep-list", "datctl_ep_list_" + mode), 1.0, "s", True, "< %s")
    return rows


def paired_lines(paired):
    """The paired runs, by mode: what the targets above compare within a mode."""
    values, probe_modes = paired
    if not values:
        return ["## Runs paired by the machine's mode", "", "(No paired run in this run.)", ""]
    md = ["## Runs paired by the machine's mode", "",
          "Short runs of each stack, each between two probes: the floor's 8 B ping-pong (20000 hops, a few "
          "milliseconds). A probe within %.1f\u00d7 the run's fastest says the fast mode, one from %.1f\u00d7 "
          "it the slow mode; a run counts where both its probes agree. Each value is the median of the runs "
          "in that mode (each run's own median)." % (PAIRED_FAST_MAX, PAIRED_SLOW_MIN), "",
          "| mode | probes (median, count) | path | measure | stack | size | median | runs |",
          "|---|--:|---|---|---|--:|--:|--:|"]
    # By mode, path, measure, wait and stack, then by size as a number.
    for k, v in sorted(values.items(), key=lambda kv: (MODES.index(kv[0][0]), str(kv[0][1:5]), kv[0][5])):
        mode, path, measure, wait, stack, size = k
        unit = next(u for m, _, u, _ in MEASURES if m == measure)
        md.append("| %s | %s \u00b5s, %d | %s | %s%s | %s | %s | %s %s | %d |" % (
            mode, fmt(med(probe_modes[mode]), "us"), len(probe_modes[mode]), path, measure,
            "" if wait in ("-", "poll") else " (%s)" % wait, stack, size_label(size, measure),
            fmt(med(v), unit), unit_label(unit), len(v)))
    return md + [""]


def unit_label(unit):
    return {"us": "\u00b5s", "gbps": "GB/s", "cps": "conn/s", "bytes": "B", "s": "s"}.get(unit, unit)


def scale_lines(scale):
    lines = ["| measure | value | objects |", "|---|--:|--:|"]
    names = [("datd-scale-eps", "datd_rss_per_ep", "datd resident set per endpoint (shm IA)", "B"),
             ("datd-scale-eps", "datd_rss_eps", "datd resident set growth with the endpoints", "KiB"),
             ("datd-scale-conns-shm", "datd_rss_per_conn",
              "datd resident set per connection, shm IA (beyond its two endpoints)", "B"),
             ("datd-scale-conns-tcp", "datd_rss_per_conn",
              "datd resident set per connection, tcp IA same host (beyond its two endpoints)", "B"),
             ("datctl-ep-list", "datctl_ep_list_json", "`datctl --json ep list`, wall time (best of 3)", "s"),
             ("datctl-ep-list", "datctl_ep_list_table", "`datctl ep list` (the table), wall time (best of 3)",
              "s")]
    any_value = False
    for stack, name, label, unit in names:
        v = scale.get((stack, name))
        if not v:
            lines.append("| %s | %s | %s |" % (label, DASH, DASH))
            continue
        any_value = True
        value = med([x for x, _ in v])
        lines.append("| %s | %s %s | %d |" % (label, "%.3f" % value if unit == "s" else "%.0f" % value, unit,
                                                v[0][1]))
    return lines if any_value else lines + ["", "(datd's scale was not measured in this run.)"]


def write_markdown(out, work, meta, notes, results, runs, scale, paired):
    md = ["# datd benchmark results", "",
          "Written by `bench/run-peers` (see bench/README.md); do not edit by hand. Reproduce with:",
          "", "```sh", "bench/run-peers%s    # as root" % (
              " --quick" if meta.get("quick") == "1" else
              "" if meta.get("reps", "5") == "5" else " --reps %s" % meta["reps"]), "```", ""]
    if any("WARNING" in n for n in notes):
        md += ["> **The machine was busy during this run: the numbers below are noisy.** "
               "Compare ratios taken in the same run, and re-run on a quiet machine for the record.", ""]
    md += ["## The machine", "",
           "| | |", "|---|---|",
           "| date (UTC) | %s |" % meta.get("date", "?"),
           "| CPUs | %s \u00d7 %s |" % (meta.get("nproc", "?"), meta.get("cpu_model", "?")),
           "| memory | %s |" % meta.get("memory", "?"),
           "| kernel | %s |" % meta.get("kernel", "?"),
           "| OS | %s |" % meta.get("os", "?"),
           "| clock source | %s |" % meta.get("clocksource", "?"),
           "| load average (1, 5, 15 min) before / after (after counts the run itself) | %s / %s |" % (
               meta.get("load_before", "?"), meta.get("load_after", "?")),
           "| CPU time used by others, over 1 s while nothing of ours ran | %s |" % meta.get("cpu_busy_pct", "?"),
           "| server CPU, client CPU | %s |" % meta.get("cpus", "?"),
           "| repetitions (median taken) | %s%s |" % (meta.get("reps", "?"),
                                                      " (--quick: short runs)" if meta.get("quick") == "1" else ""),
           "| libfabric-bin | %s |" % meta.get("version_libfabric-bin", "?"),
           "| ucx-utils | %s |" % meta.get("version_ucx-utils", "?"),
           ""]
    if notes:
        md += ["## Notes from the run", ""] + ["- %s" % n for n in notes] + [""]
    md += ["## The targets (issue 7)", "",
           "Judged from this run's medians, and for the latency and 64 KiB streaming targets also from "
           "short runs paired by the machine's mode (it moves between a fast and a slow mode every few "
           "seconds, see below and bench/README.md). The bar is computed from the peer measured in the same "
           "run; the cache-line floor of the medians is its best repetition, that of a mode the probes "
           "that said it.", "",
           "| target | datd | bar | verdict | by how much |", "|---|--:|--:|---|---|"]
    md += ["| %s |" % " | ".join(r) for r in targets(results, scale, paired)] + [""]
    md += paired_lines(paired)
    md += ["## datd's scale", "",
           "A datd started for the measure alone; its resident set (VmRSS) read before and after "
           "`datbench scale` made the objects, divided by their number (connections: both ends' "
           "endpoints existed before; a connection's shm region is a memfd shared with the two processes, "
           "counted in datd's resident set only for the pages datd itself touched).", ""]
    md += scale_lines(scale) + [""]
    md += ["## How to read the tables", "",
           "- Latency is half a round trip; bandwidth is bytes \u00f7 time in GB/s (10^9 B/s).",
           "- Each number is the median over the repetitions of each run's median (p99).",
           "- The `datd` columns are `datbench` (bench/README.md) over a private datd on the same machine in the "
           "same run (shm IA on one host, tcp IA across the namespaces); \u201c" + DASH + "\u201d where it did "
           "not run or failed (see the notes). The ratio column is datd \u00f7 that row's peer.",
           "- Connection rate: DAPL's published %.1fk connections/s (ucm provider, InfiniBand) is the "
           "historical bar of issue 7; it is quoted, not measured here." % (DAPL_UCM_CPS / 1000),
           "- fi_pingpong prints only the mean of the whole run (no percentiles): its p99 is n/a. "
           "Its bandwidth rows are ping-pong (size \u00f7 half round trip), not streaming: the Debian "
           "package ships no streaming test.",
           "- ucx_perftest's percentiles are its own, over its last 2048 iterations, from two separate runs "
           "(`-R 50`, `-R 99`); on a busy machine the p99 can come out below the median (marked *). "
           "Its bandwidth has no p99.",
           "- ucx_perftest allocates its buffers through UCX, which puts them in shared memory on the posix "
           "transport: its RDMA write/read rows are then a plain memcpy into the peer's mapping, not a "
           "cross-memory-attach copy into an arbitrary user buffer.",
           "- Bandwidth p99 is the bandwidth of the slowest 1% of operations (the slow tail).",
           ""]
    for path, path_title in PATHS:
        body = []
        for measure, title, unit, better in MEASURES:
            t = table(results, path, measure, unit, better)
            if t:
                body += ["### %s" % title, ""] + t + [""]
        if body:
            md += ["## %s" % path_title[0].upper() + path_title[1:], ""] + body
    work = os.path.abspath(work)
    md += ["## The exact commands", "",
           "The floors are built by run-peers, from the top of the tree, with:", "",
           "```", meta.get("floor_build", "?"), "```", "",
           "Commands of the first repetition, servers started first (`<work>`: run-peers' temporary directory; "
           "across hosts, the namespaces are %s):" % meta.get("namespaces", "not made"), "", "```"]
    for r in runs:
        if r["rep"] != 1:
            continue
        for role in ("server", "client"):
            if r[role]:
                md.append("%-7s %s" % (role + ":", r[role].replace(work, "<work>")))
    md += ["```", ""]
    for batch in ("ucx-lat.batch", "ucx-bw.batch", "ucx-paired.batch"):
        try:
            with open(os.path.join(work, batch)) as f:
                md += ["`<work>/%s` (ucx_perftest -b: label, then the test's options):" % batch, "",
                       "```", f.read().rstrip("\n"), "```", ""]
        except OSError:
            pass
    with open(out, "w") as f:
        f.write("\n".join(md))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()

    meta = read_meta(a.work)
    with open(os.path.join(a.work, "notes.txt")) as f:
        notes = [n.strip() for n in f if n.strip()]
    samples, runs, scale = collect(a.work)
    paired = collect_paired(a.work)
    notes += DATD_NOTES
    results = []
    for (path, measure, wait, stack, size), s in sorted(samples.items(), key=lambda kv: str(kv[0])):
        unit = next(u for m, _, u, _ in MEASURES if m == measure)
        results.append({"path": path, "measure": measure, "wait": wait, "stack": stack, "size": size,
                        "unit": unit, "median": med(s["median"]), "p99": med(s["p99"]),
                        "reps_median": s["median"], "reps_p99": s["p99"]})
    with open(a.json, "w") as f:
        json.dump({"machine": meta, "notes": notes, "results": results, "runs": runs,
                   "paired": {"probes": paired[1],
                              "runs": [{"mode": k[0], "path": k[1], "measure": k[2], "wait": k[3],
                                        "stack": k[4], "size": k[5], "values": v}
                                       for k, v in sorted(paired[0].items(), key=lambda kv: str(kv[0]))]},
                   "datd_scale": [{"stack": k[0], "name": k[1], "values": [x for x, _ in v],
                                   "count": v[0][1]} for k, v in sorted(scale.items())],
                   "targets": [dict(zip(("target", "datd", "bar", "verdict", "by"), t))
                               for t in targets(results, scale, paired)]}, f, indent=1)
        f.write("\n")
    write_markdown(a.out, a.work, meta, notes, results, runs, scale, paired)
    if not results:
        print("results.py: no result was parsed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Compare two pytest junit XML reports (real cuDNN frontend vs dnngraph) file by file.

Usage:
    junit_table.py FRONTEND.xml DNNGRAPH.xml [--files a.py b.py ...] [--out table.txt]
                   [--list N] [--live-frontend F.jsonl] [--live-dnngraph D.jsonl]

Each testcase is classified once: failed (a <failure>), error (an <error>, e.g. a collection
error, a crashed xdist worker or a teardown error), skipped (<skipped>), else passed. Testcases
are attributed to a test file through their classname (pytest writes the file's path relative
to the rootdir with dots, e.g. ``conv.graph.test_conv_bias``; a collection error carries the
dotted path in ``name`` and an empty classname). When a junit XML is missing or unreadable
(the run was cut before pytest's session end) and a live log of the harness plugin
(fe_suite_plugin.py, one JSON line per test report) is given, the outcomes come from the live
log instead, and the table says so; with neither, the run is shown as missing, not as zeros.

Prints per file ``passed/failed/skipped/error`` for both runs, the totals, the ratio
dnngraph_passed / frontend_passed, and (with --list N, default 25) up to N tests that pass with
the frontend but not with dnngraph, and the reverse.
"""

import argparse
import json
import os
import sys
import xml.etree.ElementTree as ET

OUTCOMES = ("passed", "failed", "skipped", "error")


def _module_key(path):
    """'conv/graph/test_conv_bias.py' -> 'conv.graph.test_conv_bias'."""
    path = path.replace(os.sep, "/")
    if path.endswith(".py"):
        path = path[:-3]
    return path.strip("/").replace("/", ".")


# --timeout-marker: skips whose message holds it count as a fifth outcome, "timeout" (the CPU dry
# run reports a test its per-test watchdog cut as such a skip).
TIMEOUT_MARKER = None


def _classify(case):
    tags = {child.tag for child in case}
    if "failure" in tags:
        return "failed"
    if "error" in tags:
        return "error"
    if "skipped" in tags:
        if TIMEOUT_MARKER:
            for child in case:
                if child.tag == "skipped" and TIMEOUT_MARKER in (child.get("message") or "") + (child.text or ""):
                    return "timeout"
        return "skipped"
    return "passed"


def read_report(path):
    """Return ({test id: outcome}, None) or (None, reason)."""
    if not path or not os.path.exists(path):
        return None, "no report (run did not finish or was not made)"
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        return None, f"unreadable report ({exc})"
    results = {}
    for case in root.iter("testcase"):
        classname = case.get("classname") or ""
        name = case.get("name") or ""
        test_id = f"{classname}::{name}" if classname else name
        outcome = _classify(case)
        # A test reported twice (call failure + teardown error) keeps its worst outcome.
        previous = results.get(test_id)
        if previous is None or OUTCOMES.index(outcome) > OUTCOMES.index(previous):
            results[test_id] = outcome
    return results, None


def _id_from_nodeid(nodeid):
    """'conv/graph/test_x.py::Cls::test[p]' -> 'conv.graph.test_x.Cls::test[p]' (junit's form)."""
    parts = nodeid.split("::")
    dotted = _module_key(parts[0])
    if len(parts) == 1:
        return dotted
    return ".".join([dotted] + parts[1:-1]) + "::" + parts[-1]


def read_live_log(path):
    """Outcomes from the harness plugin's JSON lines, classified like the junit XML."""
    if not path or not os.path.exists(path):
        return None, "no live log"
    results = {}
    with open(path) as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line cut by a kill
            test_id = _id_from_nodeid(rec.get("nodeid", ""))
            when, outcome = rec.get("when"), rec.get("outcome")
            if when == "collect":
                new = "error"
            elif outcome == "skipped":
                new = "skipped"
            elif outcome == "failed":
                new = "failed" if when == "call" else "error"
            elif when == "call":
                new = "passed"
            else:
                continue  # a passed setup/teardown says nothing by itself
            previous = results.get(test_id)
            if previous is None or OUTCOMES.index(new) > OUTCOMES.index(previous):
                results[test_id] = new
    return results, None


def load(junit_path, live_path):
    """(results, note): the junit XML when readable, else the live log, else (None, reason)."""
    results, err = read_report(junit_path)
    if results is not None:
        return results, None
    live, live_err = read_live_log(live_path)
    if live is not None:
        return live, f"{err}; outcomes taken from the live log {os.path.basename(live_path)} (tests not reached are absent)"
    return None, err


def file_of(test_id, module_keys):
    """The known test file a test id belongs to (longest dotted-prefix match), else 'other'."""
    dotted = test_id.split("::", 1)[0]
    best = None
    for key in module_keys:
        if dotted == key or dotted.startswith(key + "."):
            if best is None or len(key) > len(best):
                best = key
    return best or "other"


def tally(results, module_keys):
    table = {}
    for test_id, outcome in results.items():
        key = file_of(test_id, module_keys)
        row = table.setdefault(key, dict.fromkeys(OUTCOMES, 0))
        row[outcome] += 1
    return table


def fmt_row(row):
    if row is None:
        return "-"
    return "/".join(str(row[o]) for o in OUTCOMES)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("frontend")
    parser.add_argument("dnngraph")
    parser.add_argument("--files", nargs="*", default=[], help="test files (paths relative to the pytest rootdir), in display order")
    parser.add_argument("--out", help="also write the table to this file")
    parser.add_argument("--list", type=int, default=25, help="list up to N tests whose outcome differs (default 25; 0: none)")
    parser.add_argument("--live-frontend", help="live log (JSON lines) of the frontend run, used when its junit XML is missing")
    parser.add_argument("--live-dnngraph", help="live log (JSON lines) of the dnngraph run, used when its junit XML is missing")
    parser.add_argument("--title", help="a line printed above the table (the CPU dry run labels itself)")
    parser.add_argument("--timeout-marker", help="count skips whose message holds this text as a fifth column, timeout")
    args = parser.parse_args(argv)
    global OUTCOMES, TIMEOUT_MARKER
    if args.timeout_marker:
        TIMEOUT_MARKER = args.timeout_marker
        OUTCOMES = OUTCOMES + ("timeout",)

    fe, fe_err = load(args.frontend, args.live_frontend)
    dg, dg_err = load(args.dnngraph, args.live_dnngraph)

    keys = [_module_key(f) for f in args.files]
    for results in (fe, dg):
        for test_id in results or {}:
            dotted = test_id.split("::", 1)[0]
            if file_of(test_id, keys) == "other" and "::" in test_id and dotted not in keys:
                keys.append(dotted)
    fe_t = tally(fe, keys) if fe is not None else {}
    dg_t = tally(dg, keys) if dg is not None else {}
    given = {_module_key(f) for f in args.files}
    rows = [k for k in keys if k in fe_t or k in dg_t or k in given]
    if "other" in fe_t or "other" in dg_t:
        rows.append("other")

    def shown(key):
        return key if key == "other" else key.replace(".", "/") + ".py"

    lines = [f"*** {args.title} ***"] if args.title else []
    width = max([len(shown(r)) for r in rows] + [len("file")])
    cols = "p/f/s/e/t" if TIMEOUT_MARKER else "p/f/s/e"
    head = f"{'file':<{width}}  {'frontend ' + cols:>20}  {'dnngraph ' + cols:>20}"
    lines.append(head)
    lines.append("-" * len(head))
    for key in rows:
        fe_row = fe_t.get(key, dict.fromkeys(OUTCOMES, 0)) if fe is not None else None
        dg_row = dg_t.get(key, dict.fromkeys(OUTCOMES, 0)) if dg is not None else None
        lines.append(f"{shown(key):<{width}}  {fmt_row(fe_row):>20}  {fmt_row(dg_row):>20}")
    lines.append("-" * len(head))

    def total(results_t, results):
        if results is None:
            return None
        row = dict.fromkeys(OUTCOMES, 0)
        for r in results_t.values():
            for o in OUTCOMES:
                row[o] += r[o]
        return row

    fe_total, dg_total = total(fe_t, fe), total(dg_t, dg)
    lines.append(f"{'TOTAL':<{width}}  {fmt_row(fe_total):>20}  {fmt_row(dg_total):>20}")
    if fe_err:
        lines.append(f"frontend: {fe_err}")
    if dg_err:
        lines.append(f"dnngraph: {dg_err}")
    if fe_total is not None and dg_total is not None:
        if fe_total["passed"]:
            ratio = dg_total["passed"] / fe_total["passed"]
            lines.append(f"dnngraph_passed / frontend_passed = {dg_total['passed']}/{fe_total['passed']} = {ratio:.3f}")
        else:
            lines.append(f"dnngraph_passed / frontend_passed = {dg_total['passed']}/0 (undefined: the frontend passed nothing)")
        both = set(fe) & set(dg)
        lost = sorted(t for t in both if fe[t] == "passed" and dg[t] != "passed")
        gained = sorted(t for t in both if dg[t] == "passed" and fe[t] != "passed")
        only_fe = sorted(set(fe) - set(dg))
        only_dg = sorted(set(dg) - set(fe))
        lines.append(
            f"frontend-pass/dnngraph-not: {len(lost)}; dnngraph-pass/frontend-not: {len(gained)}; "
            f"ids only in frontend report: {len(only_fe)}; only in dnngraph report: {len(only_dg)}"
        )
        if args.list > 0:
            for title, items, src in (("passes with the frontend, not with dnngraph", lost, dg),
                                      ("passes with dnngraph, not with the frontend", gained, fe)):
                if items:
                    lines.append(f"-- {title} (first {min(len(items), args.list)} of {len(items)}):")
                    for t in items[: args.list]:
                        lines.append(f"   {t}  [{src[t]}]")
    lines.append("columns: " + "/".join(OUTCOMES))
    if args.title:
        lines.append(f"*** {args.title} ***")

    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

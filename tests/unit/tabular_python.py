#!/usr/bin/python3
"""Python tensordict v0.14's tabular files, without pandas (Debian 12 has none): written and
checked with the stdlib csv and json modules, and numpy for pandas' float text.

Usage: tabular_python.py write DIR   writes DIR/py.csv, py.json, py.jsonl as v0.14 writes TABLE
       tabular_python.py check DIR   checks that DIR/cpp.csv, cpp.json, cpp.jsonl (what
                                     tensordict-cpp wrote from TABLE) are what v0.14 writes

TABLE is a TensorDict(batch_size=[5]) written with separator=".". v0.14 writes CSV through
pandas' DataFrame.to_csv(index=False): its float columns go through numpy's astype(str) (the
shortest text that reads back in the column's dtype: float32 0.1 is "0.1"), NaN as "", bools as
True/False, then Python's csv writer (QUOTE_MINIMAL, lineterminator "\\n"). JSON goes through
its stdlib path: json.dumps of a list of records, each value value[i].item() (float32 0.1 is the
double 0.10000000149011612), JSON Lines joined with "\\n". The leaf "obs.vel" of shape [5, 2] is
tensordict-cpp's extension (v0.14 refuses it): element columns "obs.vel[0]", "obs.vel[1]" in CSV,
nested lists in JSON (docs/tabular.md).
The C++ side (tests/unit/tabular_test.cpp) builds the same table. Exit code 0 when all is well;
otherwise the problem is printed to stderr and the exit code is 1.
"""
import csv
import io
import json
import math
import os
import sys

import numpy as np

N = 5
# (column name, values): the leaves of TABLE in key order, nested keys joined with ".".
TABLE = [
    ("i64", np.array([3, -7, 2**40, 0, 9], dtype=np.int64)),
    ("i32", np.array([1, 2, -3, 2**31 - 1, 0], dtype=np.int32)),
    ("u8", np.array([0, 255, 7, 1, 2], dtype=np.uint8)),
    ("f64", np.array([0.1, -2.5e-7, 1e16, math.nan, 1 / 3], dtype=np.float64)),
    ("f32", np.array([0.1, 1e-4, 3.4028235e38, -0.0, 123456789.125], dtype=np.float32)),
    ("f16", np.array([0.1, 65504, 1e-5, 1.0, -2.5], dtype=np.float16)),
    ("flag", np.array([True, False, True, True, False])),
    ("name", ["plain", "a,b", 'say "hi"', "line\nbreak", "na\u00efve \u2713"]),
    ("obs.pos", np.array([0.5, 1.5, math.inf, -math.inf, 2.0], dtype=np.float64)),
    ("obs.vel", np.array([[0.25, -1.0], [2.5, 3.0], [0.1, 0.2], [1e-5, 1e20], [0.0, -0.0]], dtype=np.float32)),
]


def csv_cells(values):
    """One column's cells as pandas' to_csv writes them."""
    if isinstance(values, list):
        return ["" if v is None else str(v) for v in values]
    if values.dtype.kind == "f":
        cells = values.astype(str)
        return ["" if math.isnan(v) else c for v, c in zip(values.tolist(), cells.tolist())]
    return [str(v) for v in values.tolist()]


def csv_columns():
    """(name, cells) per CSV column: 1-D leaves as themselves, [N, K] leaves as K element columns."""
    out = []
    for name, values in TABLE:
        if isinstance(values, np.ndarray) and values.ndim == 2:
            for k in range(values.shape[1]):
                out.append(("%s[%d]" % (name, k), csv_cells(values[:, k])))
        else:
            out.append((name, csv_cells(values)))
    return out


def expected_csv():
    columns = csv_columns()
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")  # pandas' writer settings
    writer.writerow([name for name, _ in columns])
    for r in range(N):
        writer.writerow([cells[r] for _, cells in columns])
    return buffer.getvalue()


def records():
    out = []
    for r in range(N):
        record = {}
        for name, values in TABLE:
            record[name] = values[r] if isinstance(values, list) else values[r].tolist()  # item() / tolist()
        out.append(record)
    return out


def expected_json(lines):
    recs = records()
    if lines:
        return "\n".join(json.dumps(rec, default=str) for rec in recs)
    return json.dumps(recs, default=str)


FILES = [("csv", expected_csv), ("json", lambda: expected_json(False)), ("jsonl", lambda: expected_json(True))]


def write(directory):
    for ext, make in FILES:
        with open(os.path.join(directory, "py." + ext), "w", encoding="utf-8", newline="") as f:
            f.write(make())


def same_cells(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def check(directory):
    problems = []
    for ext, make in FILES:
        path = os.path.join(directory, "cpp." + ext)
        with open(path, "rb") as f:
            raw = f.read()
        text = raw.decode("utf-8")
        expected = make()
        # Read back with the stdlib first: a readable diagnosis before the byte comparison.
        if ext == "csv":
            got_rows = list(csv.reader(io.StringIO(text, newline="")))
            want_rows = list(csv.reader(io.StringIO(expected, newline="")))
            for r, (got, want) in enumerate(zip(got_rows, want_rows)):
                if got != want:
                    problems.append("%s: CSV row %d is %r, v0.14 writes %r" % (path, r, got, want))
            if len(got_rows) != len(want_rows):
                problems.append("%s: %d CSV rows, v0.14 writes %d" % (path, len(got_rows), len(want_rows)))
        else:
            got = [json.loads(line) for line in text.split("\n")] if ext == "jsonl" else json.loads(text)
            for r, (g, w) in enumerate(zip(got, records())):
                if list(g) != list(w) or not all(same_cells(g[k], w[k]) for k in w):
                    problems.append("%s: record %d is %r, v0.14 writes %r" % (path, r, g, w))
        if text != expected:
            problems.append("%s: not byte for byte what v0.14 writes:\n%r\nexpected\n%r" % (path, text, expected))
    return problems


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        print(__doc__, file=sys.stderr)
        return 2
    if sys.argv[1] == "write":
        write(sys.argv[2])
        return 0
    problems = check(sys.argv[2])
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

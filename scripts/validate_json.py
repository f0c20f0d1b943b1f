"""Runs every gpukit command that writes a JSON document (successes, failures and merges) in
a temporary folder, and validates each document against its JSON Schema in docs/schemas/ (the
schema its `schema` field names); JSON-lines outputs (`histogram --per-frame`) line by line.
Exits 1 on the first invalid document.

    python3 scripts/validate_json.py --gpukit target/debug/gpukit     (needs jsonschema)
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMAS = os.path.join(ROOT, "docs", "schemas")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpukit", required=True)
    args = ap.parse_args()
    g = os.path.abspath(args.gpukit)
    tmp = tempfile.mkdtemp(prefix="gpukit-json-")
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "cache"), NO_COLOR="1")

    def run(*argv, ok=(0,)):
        r = subprocess.run([g, *argv], cwd=tmp, env=env, capture_output=True, text=True)
        if r.returncode not in ok:
            sys.exit(f"gpukit {' '.join(argv)}: exit {r.returncode}\n{r.stderr}")

    fx = os.path.join(ROOT, "fixtures")
    shutil.copy(os.path.join(fx, "hopper.png"), os.path.join(tmp, "a.png"))
    shutil.copy(os.path.join(fx, "golden", "hopper-box-r15.png"), os.path.join(tmp, "b.png"))
    with open(os.path.join(tmp, "bad.png"), "w") as f:
        f.write("not an image\n")
    for d, names in (("golden", ["a.png", "b.png", "gone.png"]), ("out", ["a.png", "b.png", "new.png"])):
        os.makedirs(os.path.join(tmp, d))
        for n in names:
            shutil.copy(os.path.join(tmp, "a.png" if n != "b.png" else "b.png"), os.path.join(tmp, d, n))
    shutil.copy(os.path.join(tmp, "a.png"), os.path.join(tmp, "out", "b.png"))

    # A Y4M stream of three 5x3 4:2:0 frames and a raw gray16le one, for --per-frame.
    with open(os.path.join(tmp, "clip.y4m"), "wb") as f:
        f.write(b"YUV4MPEG2 W5 H3 F25:1 Ip A1:1 C420jpeg XCOLORRANGE=LIMITED\n")
        for k in range(3):
            f.write(b"FRAME\n" + bytes((i * 7 + k) % 256 for i in range(15 + 2 * 6)))
    with open(os.path.join(tmp, "clip.gray16"), "wb") as f:
        f.write(bytes(i % 256 for i in range(2 * 4 * 4 * 2)))

    cpu = ["--backend", "cpu"]
    docs = []
    lines = []

    def jsonl(name, *argv):
        run(*argv)
        lines.append(name)

    def doc(name, *argv, ok=(0,)):
        run(*argv, ok=ok)
        docs.append(name)

    doc("devices.json", "devices", "--json", "devices.json")
    doc("hist.json", *cpu, "histogram", "a.png", "--alpha", "--json", "hist.json")
    doc("sum.json", *cpu, "histogram", "a.png", "b.png", "--sum", "--json", "sum.json")
    doc("hist-failed.json", *cpu, "histogram", "a.png", "bad.png", "--json", "hist-failed.json", ok=(1,))
    doc("shard0.json", *cpu, "histogram", "a.png", "--sum", "--json", "shard0.json")
    doc("shard1.json", *cpu, "histogram", "b.png", "--sum", "--json", "shard1.json")
    doc("merged.json", "merge", "shard0.json", "shard1.json", "--json", "merged.json")
    doc("report.json", *cpu, "blur", "a.png", "b.png", "bad.png", "--out-dir", "blurred", "-r", "2", "--report", "report.json", ok=(1,))
    doc("report2.json", *cpu, "blur", "a.png", "b.png", "--out-dir", "blurred", "-r", "2", "--skip-existing", "--report", "report2.json")
    doc("merged-reports.json", "merge", "report.json", "report2.json", "--json", "merged-reports.json")
    doc("cmp.json", *cpu, "compare", "a.png", "b.png", "--json", "cmp.json", ok=(1,))
    doc("cmp-match.json", *cpu, "compare", "a.png", "a.png", "--ssim", "--diff", "d.png", "--json", "cmp-match.json")
    doc("cmp-error.json", *cpu, "compare", "a.png", "bad.png", "--json", "cmp-error.json", ok=(2,))
    doc("cmp-folder.json", *cpu, "compare", "golden", "out", "--json", "cmp-folder.json", ok=(1,))
    doc("bench.json", *cpu, "bench", "copy", "scan", "--copy-mib", "1", "--scan-max-log2", "12", "--reps", "2", "--warmup", "1", "--warmup-ms", "0", "--json", "bench.json")
    doc("tune.json", "tune", "histogram", "--quick", "--tune-cache", "tc.json", "--json", "tune.json")

    jsonl("frames.jsonl", *cpu, "histogram", "clip.y4m", "--per-frame", "--json", "frames.jsonl")
    jsonl("frames16.jsonl", *cpu, "histogram", "clip.gray16", "--raw", "4x4", "--pix-fmt", "gray16le",
          "--per-frame", "--bins", "1000", "--json", "frames16.jsonl")
    values = []
    for name in docs:
        with open(os.path.join(tmp, name)) as f:
            values.append((name, json.load(f)))
    for name in lines:
        with open(os.path.join(tmp, name)) as f:
            rows = [json.loads(line) for line in f]
        if not rows:
            sys.exit(f"{name}: no lines")
        values += [(f"{name}, line {i + 1}", v) for i, v in enumerate(rows)]
    for name, value in values:
        sid = value.get("schema")
        if not isinstance(sid, str) or not sid.startswith("gpukit.") or "/" not in sid:
            sys.exit(f"{name}: no gpukit schema field ({sid!r})")
        path = os.path.join(SCHEMAS, sid[len("gpukit."):].split("/")[0] + ".schema.json")
        with open(path) as f:
            schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schema)
        errors = list(jsonschema.Draft202012Validator(schema).iter_errors(value))
        if errors:
            e = errors[0]
            sys.exit(f"{name}: not valid against {os.path.relpath(path, ROOT)}: {e.message} at {list(e.absolute_path)}")
        print(f"{name}: valid {sid}")
    shutil.rmtree(tmp)
    print(f"{len(values)} passed, 0 failed")


if __name__ == "__main__":
    main()

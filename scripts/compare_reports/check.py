#!/usr/bin/env python3
"""gpukit compare's CI reports checked from outside: a real run over a folder pair with every
kind of case (match, mismatch, size mismatch, unreadable file, missing, extra, names XML must
escape) writes --junit, which is validated against Jenkins' junit-10.xsd (beside this file)
with xmlschema and read back: one test case per file, the failures where the JSON report
says. Run by .ci/run; needs xmlschema (PyPI).

    python scripts/compare_reports/check.py --gpukit target/debug/gpukit
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import xmlschema

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FIXTURES = ROOT / "fixtures" / "compare"


def make_folders(d: Path) -> tuple[Path, Path]:
    """golden/ and out/ with a match, two mismatches (one in a folder, one with a name XML
    must escape), a size mismatch, an unreadable file, a missing and an extra file."""
    golden, out = d / "golden", d / "out"
    for p in (golden / "sub", out / "sub"):
        p.mkdir(parents=True)
    e, a = FIXTURES / "expected.png", FIXTURES / "actual.png"
    pairs = {
        "same.png": (e, e),
        "sub/changed.png": (e, a),
        "odd <&\"'> name.png": (e, a),
        "sized.png": (e, ROOT / "fixtures" / "hopper.png"),
    }
    for name, (x, y) in pairs.items():
        shutil.copy(x, golden / name)
        shutil.copy(y, out / name)
    shutil.copy(e, golden / "broken.png")
    (out / "broken.png").write_bytes(b"not an image")
    shutil.copy(e, golden / "gone.png")
    shutil.copy(a, out / "new.png")
    return golden, out


def check_junit(gpukit: str, d: Path) -> None:
    golden, out = make_folders(d)
    xml, js = d / "report.xml", d / "report.json"
    r = subprocess.run(
        [gpukit, "compare", str(golden), str(out), "--junit", str(xml), "--json", str(js),
         "--diff", str(d / "diffs")],
        capture_output=True, text=True)
    assert r.returncode == 2, (r.returncode, r.stderr)
    schema = xmlschema.XMLSchema(str(HERE / "junit-10.xsd"))
    schema.validate(str(xml))
    doc = json.loads(js.read_text())
    suite = ET.parse(xml).getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    want = {f["expected"][len(str(golden)) + 1:]: f["status"] for f in doc["files"]}
    want.update({m: "missing" for m in doc["missing"]})
    want.update({x: "extra" for x in doc["extra"]})
    assert set(cases) == set(want), (sorted(cases), sorted(want))
    for name, status in want.items():
        c = cases[name]
        failure, error = c.find("failure"), c.find("error")
        if status == "match":
            assert failure is None and error is None, name
        elif status == "error":
            assert error is not None and name in error.get("message"), name
        else:
            assert failure is not None and failure.get("type") == status, (name, status)
    changed = cases["sub/changed.png"].find("failure")
    assert "18 of 384 pixels differ" in changed.get("message"), changed.get("message")
    assert str(d / "diffs" / "sub" / "changed.png") in changed.get("message")
    counts = {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": 7, "failures": 5, "errors": 1, "skipped": 0}, counts
    print(f"JUnit: {xml.name} valid against junit-10.xsd, {counts['tests']} cases as the JSON says")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpukit", default=str(ROOT / "target" / "debug" / "gpukit"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        check_junit(args.gpukit, Path(t))
    return 0


if __name__ == "__main__":
    sys.exit(main())

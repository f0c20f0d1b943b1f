#!/usr/bin/env python3
"""gpukit compare's CI reports checked from outside: a real run over a folder pair with every
kind of case (match, mismatch, size mismatch, unreadable file, missing, extra, names XML and
HTML must escape) writes --junit and --html. The JUnit report is validated against Jenkins'
junit-10.xsd (beside this file) with xmlschema and read back: one test case per file, the
failures where the JSON report says. The HTML report is loaded in headless Chromium: no
console message at all (errors included), every image loaded, the slider's script ran, and
every failing file of the JSON report has its section. Run by .ci/run; needs xmlschema
(PyPI) and chromium (Debian's package; $CHROMIUM names another binary). Never skips.

    python scripts/compare_reports/check.py --gpukit target/debug/gpukit
"""

import argparse
import html.parser
import json
import os
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


class Dom(html.parser.HTMLParser):
    """The parts of the dumped DOM the check reads: body's attributes, the sections of failing
    pairs (data-name), the images' sources and the slider labels' text."""

    def __init__(self):
        super().__init__()
        self.body, self.sections, self.images, self.showing = {}, [], [], []
        self._in_showing = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        elif tag == "section" and "pair" in (a.get("class") or ""):
            self.sections.append(a.get("data-name"))
        elif tag == "img":
            self.images.append(a.get("src"))
        elif tag == "span" and a.get("class") == "showing":
            self._in_showing = True
            self.showing.append("")

    def handle_endtag(self, tag):
        if tag == "span":
            self._in_showing = False

    def handle_data(self, data):
        if self._in_showing:
            self.showing[-1] += data


def check_html(gpukit: str, d: Path) -> None:
    golden, out = make_folders(d)
    report, js = d / "report", d / "report.json"
    r = subprocess.run(
        [gpukit, "compare", str(golden), str(out), "--html", str(report), "--json", str(js)],
        capture_output=True, text=True)
    assert r.returncode == 2, (r.returncode, r.stderr)
    doc = json.loads(js.read_text())
    page = report / "index.html"
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")
    assert chromium, "chromium is not installed (apt-get install chromium); this check never skips"
    # A profile of its own, so that no user's Chromium state changes what the page does.
    with tempfile.TemporaryDirectory() as profile:
        run = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
             "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, "console messages:\n" + "\n".join(console)
    dom = Dom()
    dom.feed(run.stdout)
    failing = sorted(f["expected"][len(str(golden)) + 1:] for f in doc["files"]
                     if f["status"] != "match")
    assert sorted(dom.sections) == failing, (dom.sections, failing)
    compared = [f for f in doc["files"] if f["status"] == "mismatch"]
    # Each compared failing pair: expected, actual, diff, and the slider's two.
    want_images = 5 * len(compared)
    assert dom.body.get("data-images-loaded") == str(want_images), dom.body
    assert dom.body.get("data-images-broken") == "0", dom.body
    assert len(dom.images) == want_images, dom.images
    for src in set(dom.images):
        assert (report / src).is_file(), src
    assert dom.showing and all(t for t in dom.showing), dom.showing
    print(f"HTML: {page.name} loads in Chromium with no console message, {want_images} images, "
          f"{len(failing)} failing files shown")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpukit", default=str(ROOT / "target" / "debug" / "gpukit"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        check_junit(args.gpukit, Path(t))
    with tempfile.TemporaryDirectory() as t:
        check_html(args.gpukit, Path(t))
    return 0


if __name__ == "__main__":
    sys.exit(main())

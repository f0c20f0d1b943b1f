// gpukit compare against pixelmatch itself: runs pixelmatch 6.0.0 and 7.2.0 (npm, with
// `checkerboard: false`, blending over white as 6.0.0 and gpukit do) and `gpukit compare` on
// every engine over every fixture pair of pixelmatch's and odiff's tests, at thresholds 0,
// 0.05, 0.1, 0.2 and 0.5, with and without anti-aliasing detection, and fails on any
// difference: the count of differing pixels, the count of anti-aliased ones, and where the
// diff image has its red and yellow pixels.
//
//     npm ci --prefix scripts/pixelmatch
//     node scripts/pixelmatch/check.mjs --gpukit target/debug/gpukit ../shared/data
//
// pixelmatch reads the PNG files itself (pngjs); the JPEG, BMP and TIFF files, which it cannot
// read, are handed to it as decoded by gpukit (`blur -r 0`, checked to leave them unchanged),
// so that these pairs check the comparison, not two JPEG decoders. gpukit runs in folder mode,
// one process per engine, threshold and mode. Exit status 0 when everything agrees, 1 when
// anything differs, 2 on trouble.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import pngjs from 'pngjs';
import pixelmatch6 from 'pixelmatch6';
import pixelmatch7 from 'pixelmatch7';

const { PNG } = pngjs;
const here = path.dirname(fileURLToPath(import.meta.url));

// The pairs of pixelmatch's tests (test/test.js, 8a against 5b included) and of odiff's.
const PAIRS = [
    ['pixelmatch', '1a.png', '1b.png'],
    ['pixelmatch', '2a.png', '2b.png'],
    ['pixelmatch', '3a.png', '3b.png'],
    ['pixelmatch', '4a.png', '4b.png'],
    ['pixelmatch', '5a.png', '5b.png'],
    ['pixelmatch', '6a.png', '6b.png'],
    ['pixelmatch', '6a.png', '6a.png'],
    ['pixelmatch', '7a.png', '7b.png'],
    ['pixelmatch', '8a.png', '5b.png'],
    ['odiff', 'antialiasing-on.png', 'antialiasing-off.png'],
    ['odiff', 'orange.png', 'orange_changed.png'],
    ['odiff', 'extreme-alpha.png', 'extreme-alpha-1.png'],
    ['odiff', 'tiger.jpg', 'tiger-2.jpg'],
    ['odiff', 'clouds.bmp', 'clouds-2.bmp'],
    ['odiff', 'laptops.tiff', 'laptops-2.tiff'],
];
const THRESHOLDS = [0, 0.05, 0.1, 0.2, 0.5];
const ENGINES = [['cpu', ['--backend', 'cpu']], ['vulkan', ['--backend', 'vulkan']]];
const VERSIONS = [
    ['pixelmatch 6.0.0', pixelmatch6],
    ['pixelmatch 7.2.0', pixelmatch7],
];

function usage(msg) {
    console.error(`check.mjs: ${msg}\nusage: node check.mjs --gpukit PATH DATA_DIR`);
    process.exit(2);
}

const args = process.argv.slice(2);
let gpukit = null;
let data = null;
for (let i = 0; i < args.length; i++) {
    if (args[i] === '--gpukit') gpukit = path.resolve(args[++i] ?? usage('--gpukit needs a path'));
    else if (data === null) data = path.resolve(args[i]);
    else usage(`unexpected argument ${args[i]}`);
}
if (!gpukit || !data) usage('missing arguments');

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'gpukit-pixelmatch-'));
process.on('exit', () => fs.rmSync(work, { recursive: true, force: true }));

function gpukitRun(argv, okCodes) {
    try {
        return { code: 0, stdout: execFileSync(gpukit, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }) };
    } catch (e) {
        if (e.status !== null && okCodes.includes(e.status)) return { code: e.status, stdout: e.stdout };
        console.error(`check.mjs: gpukit ${argv.join(' ')} failed (${e.status}): ${e.stderr}`);
        process.exit(2);
    }
}

// The file as pixelmatch gets it: a PNG as it is, any other format decoded by gpukit.
function asPng(file) {
    if (file.endsWith('.png')) return file;
    const out = path.join(work, `${path.basename(file)}.png`);
    if (!fs.existsSync(out)) {
        gpukitRun(['--backend', 'cpu', '--quiet', 'blur', '-r', '0', file, '-o', out], []);
        // Radius 0 must leave the pixels as they are: exact equality, checked by gpukit.
        gpukitRun(['--backend', 'cpu', '--quiet', 'compare', file, out], []);
    }
    return out;
}

function readPng(file) {
    return PNG.sync.read(fs.readFileSync(file));
}

// The folders gpukit compares: expected/NAME and actual/NAME for each pair, NAME being
// the pair's name with the expected file's extension.
const pairs = PAIRS.map(([dir, a, b], i) => {
    const ext = path.extname(a);
    const name = `${String(i).padStart(2, '0')}-${path.basename(a, ext)}-${path.basename(b, path.extname(b))}`;
    return { name, file: name + ext, a: path.join(data, dir, a), b: path.join(data, dir, b) };
});
for (const side of ['expected', 'actual']) fs.mkdirSync(path.join(work, side));
for (const p of pairs) {
    for (const f of [p.a, p.b]) if (!fs.existsSync(f)) usage(`${f}: no such file`);
    fs.symlinkSync(p.a, path.join(work, 'expected', p.file));
    fs.symlinkSync(p.b, path.join(work, 'actual', p.file));
    p.img1 = readPng(asPng(p.a));
    p.img2 = readPng(asPng(p.b));
}

// pixelmatch's answers: the count, and the positions of red (differing) and yellow
// (anti-aliased) pixels of its diff image, as one string of '.', 'r', 'y' per pixel.
function pixelmatchAnswer(match, p, threshold, antialiasing) {
    const { width, height } = p.img1;
    const out = new Uint8Array(width * height * 4);
    const options = { threshold, includeAA: !antialiasing, checkerboard: false };
    const count = match(p.img1.data, p.img2.data, out, width, height, options);
    return { count, marks: marks(out, 4), yellow: countOf(marks(out, 4), 'y') };
}

function marks(data, step) {
    const m = new Array(data.length / step);
    for (let i = 0, k = 0; i < data.length; i += step, k++) {
        const [r, g, b] = [data[i], data[i + 1], data[i + 2]];
        m[k] = r === 255 && g === 0 && b === 0 ? 'r' : r === 255 && g === 255 && b === 0 ? 'y' : '.';
    }
    return m.join('');
}

function countOf(s, c) {
    let n = 0;
    for (const x of s) n += x === c ? 1 : 0;
    return n;
}

let failures = 0;
let checks = 0;
function fail(msg) {
    failures++;
    console.log(`DIFFERS ${msg}`);
}

for (const threshold of THRESHOLDS) {
    for (const antialiasing of [false, true]) {
        const answers = pairs.map((p) => VERSIONS.map(([, m]) => pixelmatchAnswer(m, p, threshold, antialiasing)));
        for (const [engine, engineArgs] of ENGINES) {
            const diffs = path.join(work, `diff-${engine}`);
            fs.rmSync(diffs, { recursive: true, force: true });
            const argv = [...engineArgs, '--quiet', 'compare', path.join(work, 'expected'), path.join(work, 'actual'),
                '--threshold', String(threshold), '--json', '-', '--diff', diffs];
            if (antialiasing) argv.push('--antialiasing');
            const report = JSON.parse(gpukitRun(argv, [0, 1]).stdout);
            const byName = new Map(report.files.map((f) => [path.basename(f.actual), f]));
            pairs.forEach((p, i) => {
                const what = `${p.name} t=${threshold}${antialiasing ? ' --antialiasing' : ''} ${engine}`;
                const doc = byName.get(p.file);
                if (!doc || !doc.metrics) {
                    fail(`${what}: gpukit did not compare it (${doc ? doc.status + ': ' + doc.reason : 'absent'})`);
                    return;
                }
                let gpukitMarks = null;
                if (doc.diff) {
                    const d = readPng(doc.diff);
                    gpukitMarks = marks(d.data, 4);
                }
                for (const [k, [version]] of VERSIONS.entries()) {
                    const want = answers[i][k];
                    checks++;
                    if (doc.metrics.differing !== want.count) {
                        fail(`${what}: ${doc.metrics.differing} differing pixels, ${version} ${want.count}`);
                    }
                    if (doc.metrics.antialiased !== want.yellow) {
                        fail(`${what}: ${doc.metrics.antialiased} anti-aliased pixels, ${version} ${want.yellow}`);
                    }
                    if (gpukitMarks !== null && gpukitMarks !== want.marks) {
                        let n = 0;
                        for (let j = 0; j < gpukitMarks.length; j++) n += gpukitMarks[j] !== want.marks[j] ? 1 : 0;
                        fail(`${what}: the diff image's red and yellow pixels differ from ${version}'s at ${n} pixels`);
                    }
                    if (gpukitMarks === null && want.count > 0) {
                        fail(`${what}: no diff image though ${version} counts ${want.count}`);
                    }
                }
            });
        }
    }
}

console.log(`pixelmatch check: ${checks} comparisons (${pairs.length} pairs, ${THRESHOLDS.length} thresholds, ` +
    `2 anti-aliasing modes, ${ENGINES.length} engines, ${VERSIONS.length} pixelmatch versions), ${failures} differences`);
process.exit(failures ? 1 : 0);

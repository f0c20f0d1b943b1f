//! gpukit's JPEG encoder: libjpeg-turbo's arithmetic step for step (fixed-point RGB to YCbCr,
//! biased chroma downsampling, the integer `islow` DCT, quantisation by reciprocals, IJG
//! quality scaling, Annex K or optimal Huffman tables, its progressive script), so its files
//! are byte for byte those of libjpeg-turbo (`cjpeg -dct int`, Pillow, OpenCV) at the same
//! settings, and a GPU port can be checked against it (docs/fidelity.md).

mod color;
mod dct;
mod huffman;
mod progressive;
mod scratch;

pub(crate) use dct::Divisors;
use huffman::BitWriter;
pub(crate) use huffman::Table;

/// Chroma subsampling: how many luma samples share one chroma sample across and down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Subsampling {
    /// None: every pixel has its own chroma.
    S444,
    /// Half the chroma columns.
    S422,
    /// Half the chroma columns and rows (libjpeg's, Pillow's and OpenCV's default).
    S420,
}

impl Subsampling {
    /// The default for a new JPEG: 4:2:0, as cjpeg, Pillow and OpenCV write.
    pub const DEFAULT: Subsampling = Subsampling::S420;

    /// The luma component's sampling factors (the chroma components' are 1x1).
    pub fn luma_factors(self) -> (u8, u8) {
        match self {
            Subsampling::S444 => (1, 1),
            Subsampling::S422 => (2, 1),
            Subsampling::S420 => (2, 2),
        }
    }

    /// The subsampling of a frame whose luma has factors (h, v) and chroma 1x1; None for
    /// others (gpukit then writes the default).
    pub fn from_factors(h: u8, v: u8) -> Option<Subsampling> {
        match (h, v) {
            (1, 1) => Some(Subsampling::S444),
            (2, 1) => Some(Subsampling::S422),
            (2, 2) => Some(Subsampling::S420),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Subsampling::S444 => "4:4:4",
            Subsampling::S422 => "4:2:2",
            Subsampling::S420 => "4:2:0",
        }
    }
}

impl std::str::FromStr for Subsampling {
    type Err = String;
    fn from_str(s: &str) -> Result<Subsampling, String> {
        match s.replace(':', "").as_str() {
            "444" => Ok(Subsampling::S444),
            "422" => Ok(Subsampling::S422),
            "420" => Ok(Subsampling::S420),
            _ => Err(format!("{s:?}: expected 444, 422 or 420")),
        }
    }
}

/// How a JPEG is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodeOptions {
    /// 1 to 100, the IJG scale.
    pub quality: u8,
    /// Ignored for gray images.
    pub subsampling: Subsampling,
    /// libjpeg's default progressive script (`jpeg_simple_progression`); its tables are
    /// always optimised, as libjpeg does.
    pub progressive: bool,
    /// Huffman tables made for the image (two passes) instead of Annex K's.
    pub optimize: bool,
}

/// What goes before the frame: JFIF's density and the application segments.
pub struct Markers<'a> {
    /// JFIF density: unit (0 none, 1 dpi, 2 per cm) and the two densities.
    pub density: (u8, u16, u16),
    /// (marker, payload) of segments written after APP0, in order (EXIF, ICC).
    pub app: &'a [(u8, &'a [u8])],
}

/// The quantisation tables' source (T.81 Annex K.1), natural order.
const STD_LUMA_QT: [u16; 64] = [
    16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
    14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113,
    92, 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
];
const STD_CHROMA_QT: [u16; 64] = [
    17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99, 24, 26, 56, 99, 99, 99, 99, 99,
    47, 66, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
];

/// jcparam.c's `jpeg_set_quality(quality, force_baseline = TRUE)`: the table scaled by
/// 5000/q below 50 and 200 - 2q from 50, each entry rounded, within 1 and 255.
pub(crate) fn quant_table(base: &[u16; 64], quality: u8) -> [u16; 64] {
    let q = u32::from(quality.clamp(1, 100));
    let scale = if q < 50 { 5000 / q } else { 200 - 2 * q };
    base.map(|b| ((u32::from(b) * scale + 50) / 100).clamp(1, 255) as u16)
}

/// One component of the frame: its sampling factors, tables and quantised blocks.
pub(crate) struct Component {
    pub id: u8,
    pub h: usize,
    pub v: usize,
    /// Quantisation and Huffman table index (0 luma, 1 chroma).
    pub table: usize,
    /// Blocks with image samples, across and down.
    pub wblocks: usize,
    pub hblocks: usize,
    /// Blocks across and down padded to whole MCUs (the dummy blocks of interleaved scans).
    pub pw: usize,
    pub ph: usize,
    /// pw x ph blocks, row by row, zigzag order in each.
    coefs: Vec<[i16; 64]>,
}

/// Encodes 8-bit gray (`channels` 1) or RGB (3) samples as a JFIF file: SOI, APP0 (JFIF 1.01
/// with the density), the application segments as given, then the frame.
pub fn encode(
    samples: &[u8],
    width: u32,
    height: u32,
    channels: u8,
    opts: &EncodeOptions,
    markers: &Markers,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    // Room for the file at about 2 bits a sample, so it seldom grows (and copies) on the way.
    out.reserve(samples.len() / 4 + 1024);
    if !opts.progressive && !opts.optimize {
        let mut frame = Frame::new(samples.len(), width, height, channels, opts)?;
        frame.write_headers(markers, out)?;
        streamed(&mut frame, samples, out);
        out.extend_from_slice(&[0xFF, 0xD9]);
        for c in frame.comps {
            scratch::give_blocks(c.coefs);
        }
        return Ok(());
    }
    let frame = transformed(samples, width, height, channels, opts)?;
    frame.write_headers(markers, out)?;
    if opts.progressive {
        progressive::encode(&frame.comps, out);
    } else {
        baseline(&frame.comps, opts.optimize, out);
    }
    out.extend_from_slice(&[0xFF, 0xD9]);
    for c in frame.comps {
        scratch::give_blocks(c.coefs);
    }
    Ok(())
}

/// The frame of `samples` with every component's quantised coefficients, dummy blocks
/// included: all the entropy coder reads.
fn transformed(
    samples: &[u8],
    width: u32,
    height: u32,
    channels: u8,
    opts: &EncodeOptions,
) -> Result<Frame, String> {
    let mut frame = Frame::new(samples.len(), width, height, channels, opts)?;
    let (w, h) = (width as usize, height as usize);
    let (lh, lv) = (frame.lh, frame.lv);
    let comps = &mut frame.comps;
    let mut strips = color::Strips::new(w, h, channels, &comps_shape(comps), lh, lv);
    let divisors = frame.tables.map(|t| dct::Divisors::new(&t));
    for c in comps.iter_mut() {
        c.coefs = scratch::blocks(c.pw * c.ph);
    }
    // MCU row by MCU row: its samples made, then their DCT while they are still in cache.
    for m in 0..h.div_ceil(8 * lv) {
        strips.fill(samples, m);
        dct_mcu_row(&strips, m, comps, &divisors, true);
    }
    strips.give_back();
    for c in comps.iter_mut() {
        pad(c);
    }
    Ok(frame)
}

/// The DCT of MCU row `m`'s strips into each component's blocks: into the image's block rows
/// (`whole`), or into the first rows of a buffer holding one MCU row.
fn dct_mcu_row(
    strips: &color::Strips,
    m: usize,
    comps: &mut [Component],
    divisors: &[Divisors; 2],
    whole: bool,
) {
    for (c, strip) in comps.iter_mut().zip(&strips.planes) {
        for k in 0..c.v {
            let by = m * c.v + k;
            if by < c.hblocks {
                let r = if whole { by } else { k };
                let row = &mut c.coefs[r * c.pw..r * c.pw + c.wblocks];
                let at = k * 8 * strip.stride;
                dct::block_row(&strip.data[at..], strip.stride, &divisors[c.table], row);
            }
        }
    }
}

/// Whether this CPU runs the entropy coders' vector builds: AVX2 (the zero tests of a block's
/// coefficients) and BMI1/LZCNT (the bit counts).
#[cfg(target_arch = "x86_64")]
pub(super) fn coder_features() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("lzcnt")
}

/// Baseline with the standard tables (the tables known before any block), one MCU row at a
/// time: its samples made, transformed and coded while in cache (jccoefct.c's single pass),
/// so no image-sized buffer of coefficients is written and read back. DHT, SOS and the
/// entropy-coded data; the same bytes as `baseline` without optimised tables.
fn streamed(frame: &mut Frame, samples: &[u8], out: &mut Vec<u8>) {
    #[cfg(target_arch = "x86_64")]
    if coder_features() {
        // SAFETY: the features are present (checked just above).
        unsafe { streamed_avx2(frame, samples, out) };
        return;
    }
    streamed_scalar(frame, samples, out);
}

/// The portable build of `streamed` (and the twin the vector build is tested against).
pub(super) fn streamed_scalar(frame: &mut Frame, samples: &[u8], out: &mut Vec<u8>) {
    streamed_body::<false>(frame, samples, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,lzcnt")]
pub(super) unsafe fn streamed_avx2(frame: &mut Frame, samples: &[u8], out: &mut Vec<u8>) {
    streamed_body::<true>(frame, samples, out);
}

#[inline(always)]
fn streamed_body<const AVX2: bool>(frame: &mut Frame, samples: &[u8], out: &mut Vec<u8>) {
    let (w, h) = (frame.width as usize, frame.height as usize);
    let (lh, lv) = (frame.lh, frame.lv);
    let channels = if frame.comps.len() == 1 { 1 } else { 3 };
    let comps = &mut frame.comps;
    let mut strips = color::Strips::new(w, h, channels, &comps_shape(comps), lh, lv);
    let divisors = frame.tables.map(|t| dct::Divisors::new(&t));
    for c in comps.iter_mut() {
        c.coefs = scratch::blocks(c.pw * c.v);
    }
    let ntables = if comps.len() == 1 { 1 } else { 2 };
    let (dc, ac) = std_tables(ntables);
    baseline_headers(comps, &dc, &ac, out);
    let dcc: Vec<_> = dc.iter().map(Table::folded).collect();
    let acc: Vec<_> = ac.iter().map(Table::folded).collect();
    let mut tables = [0; 3];
    for (t, c) in tables.iter_mut().zip(comps.iter()) {
        *t = c.table;
    }
    let last = ntables - 1;
    let mut coder = Coder::<AVX2> {
        w: BitWriter::new(out),
        tables,
        last: [0; 3],
        dc: [&dcc[0], &dcc[last]],
        ac: [&acc[0], &acc[last]],
    };
    for m in 0..h.div_ceil(8 * lv) {
        strips.fill(samples, m);
        dct_mcu_row(&strips, m, comps, &divisors, false);
        for c in comps.iter_mut() {
            pad_mcu_row(c, m);
        }
        let row: Vec<&Component> = comps.iter().collect();
        scan_mcu_row(&row, &mut coder);
    }
    coder.w.finish();
    strips.give_back();
}

/// `pad` for a buffer holding MCU row `m` of a component: its real block rows' right edges,
/// then rows below the image from the row above.
fn pad_mcu_row(c: &mut Component, m: usize) {
    let real = (c.hblocks - m * c.v).min(c.v);
    for r in 0..real {
        for bx in c.wblocks..c.pw {
            let dc = c.coefs[r * c.pw + bx - 1][0];
            c.coefs[r * c.pw + bx] = [0; 64];
            c.coefs[r * c.pw + bx][0] = dc;
        }
    }
    for r in real..c.v {
        for mcu in 0..c.pw / c.h {
            let dc = c.coefs[(r - 1) * c.pw + mcu * c.h + c.h - 1][0];
            for bi in 0..c.h {
                c.coefs[r * c.pw + mcu * c.h + bi] = [0; 64];
                c.coefs[r * c.pw + mcu * c.h + bi][0] = dc;
            }
        }
    }
}

/// A frame's settings resolved before any sample is read: its quantisation tables and its
/// components' shapes (their coefficients still empty). The CPU encoder and the GPU one
/// (src/ops/encode/) share it, so both write the same headers around the same blocks.
pub(crate) struct Frame {
    pub width: u32,
    pub height: u32,
    pub progressive: bool,
    /// Quantisation tables, natural order: luma, chroma.
    pub tables: [[u16; 64]; 2],
    /// Luma's sampling factors (1x1 for gray).
    pub lh: usize,
    pub lv: usize,
    pub comps: Vec<Component>,
}

impl Frame {
    /// Checks the size and layout (`len` samples of `channels` each) and resolves `opts`.
    pub(crate) fn new(
        len: usize,
        width: u32,
        height: u32,
        channels: u8,
        opts: &EncodeOptions,
    ) -> Result<Frame, String> {
        if width == 0 || height == 0 || width > 65535 || height > 65535 {
            return Err(format!(
                "JPEG holds 1 to 65535 pixels a side, not {width}x{height}"
            ));
        }
        if channels != 1 && channels != 3 {
            return Err("JPEG stores neither alpha nor 16-bit samples".into());
        }
        let (w, h) = (width as usize, height as usize);
        if len != w * h * channels as usize {
            return Err("sample count differs from the image size".into());
        }
        let tables = [
            quant_table(&STD_LUMA_QT, opts.quality),
            quant_table(&STD_CHROMA_QT, opts.quality),
        ];
        let (lh, lv) = if channels == 1 {
            (1, 1)
        } else {
            let (a, b) = opts.subsampling.luma_factors();
            (a as usize, b as usize)
        };
        Ok(Frame {
            width,
            height,
            progressive: opts.progressive,
            tables,
            lh,
            lv,
            comps: component_layout(w, h, channels, lh, lv),
        })
    }

    /// SOI, APP0, the application segments, DQT and SOF: everything before the first scan.
    pub(crate) fn write_headers(&self, markers: &Markers, out: &mut Vec<u8>) -> Result<(), String> {
        let comps = &self.comps;
        out.extend_from_slice(&[0xFF, 0xD8]);
        let (unit, dx, dy) = markers.density;
        out.extend_from_slice(&[0xFF, 0xE0, 0, 16, b'J', b'F', b'I', b'F', 0, 1, 1, unit]);
        out.extend_from_slice(&dx.to_be_bytes());
        out.extend_from_slice(&dy.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        for (marker, payload) in markers.app {
            let len = payload.len() + 2;
            if len > 65535 {
                return Err(format!(
                    "an APP{} segment of {} bytes is over JPEG's 65533",
                    marker - 0xE0,
                    payload.len()
                ));
            }
            out.extend_from_slice(&[0xFF, *marker, (len >> 8) as u8, len as u8]);
            out.extend_from_slice(payload);
        }
        let used_tables = if comps.len() == 1 { 1 } else { 2 };
        for (t, table) in self.tables.iter().enumerate().take(used_tables) {
            out.extend_from_slice(&[0xFF, 0xDB, 0, 67, t as u8]);
            out.extend(huffman::ZIGZAG.iter().map(|&z| table[z as usize] as u8));
        }
        let sof = if self.progressive { 0xC2 } else { 0xC0 };
        let len = 8 + 3 * comps.len();
        out.extend_from_slice(&[0xFF, sof, 0, len as u8, 8]);
        out.extend_from_slice(&(self.height as u16).to_be_bytes());
        out.extend_from_slice(&(self.width as u16).to_be_bytes());
        out.push(comps.len() as u8);
        for c in comps {
            out.extend_from_slice(&[c.id, (c.h << 4 | c.v) as u8, c.table as u8]);
        }
        Ok(())
    }
}

/// The components of a gray (one, 1x1) or YCbCr frame (luma lh x lv, chroma 1x1), with
/// libjpeg's block counts (jcmaster.c's `initial_setup`).
fn component_layout(w: usize, h: usize, channels: u8, lh: usize, lv: usize) -> Vec<Component> {
    let mcus_x = w.div_ceil(8 * lh);
    let mcus_y = h.div_ceil(8 * lv);
    let one = |id: u8, ch: usize, cv: usize, table: usize| Component {
        id,
        h: ch,
        v: cv,
        table,
        wblocks: (w * ch).div_ceil(8 * lh),
        hblocks: (h * cv).div_ceil(8 * lv),
        pw: mcus_x * ch,
        ph: mcus_y * cv,
        coefs: Vec::new(),
    };
    if channels == 1 {
        vec![one(1, 1, 1, 0)]
    } else {
        vec![one(1, lh, lv, 0), one(2, 1, 1, 1), one(3, 1, 1, 1)]
    }
}

/// Each component's sample plane size: its blocks with image samples, in samples.
fn comps_shape(comps: &[Component]) -> Vec<(usize, usize)> {
    comps
        .iter()
        .map(|c| (c.wblocks * 8, c.hblocks * 8))
        .collect()
}

/// A component's dummy blocks (jccoefct.c): zero AC, and the DC of the last real block to
/// their left (right edge) or of the MCU's last block in the row above (bottom edge).
fn pad(c: &mut Component) {
    for by in 0..c.hblocks {
        for bx in c.wblocks..c.pw {
            let dc = c.coefs[by * c.pw + bx - 1][0];
            c.coefs[by * c.pw + bx] = [0; 64];
            c.coefs[by * c.pw + bx][0] = dc;
        }
    }
    for by in c.hblocks..c.ph {
        for mcu in 0..c.pw / c.h {
            let dc = c.coefs[(by - 1) * c.pw + mcu * c.h + c.h - 1][0];
            for bi in 0..c.h {
                c.coefs[by * c.pw + mcu * c.h + bi] = [0; 64];
                c.coefs[by * c.pw + mcu * c.h + bi][0] = dc;
            }
        }
    }
}

/// What a scan does with each of its blocks, in coding order: `comp` is the block's index
/// among the scan's components. Its methods are inlined into the scan's loop, so a visitor's
/// state (a bit writer's buffer) stays in registers.
pub(crate) trait Visit<'a> {
    fn block(&mut self, comp: usize, block: &'a [i16; 64]);
}

impl<'a, F: FnMut(usize, &'a [i16; 64])> Visit<'a> for F {
    #[inline(always)]
    fn block(&mut self, comp: usize, block: &'a [i16; 64]) {
        self(comp, block)
    }
}

/// The blocks of a scan in coding order, each with its component: an interleaved scan goes
/// MCU by MCU (dummy blocks included), a one-component scan over its real blocks only.
#[inline(always)]
fn scan_order<'a>(comps: &[&'a Component], f: &mut impl Visit<'a>) {
    if let [c] = comps {
        for by in 0..c.hblocks {
            for b in &c.coefs[by * c.pw..by * c.pw + c.wblocks] {
                f.block(0, b);
            }
        }
        return;
    }
    let (mx, my) = (comps[0].pw / comps[0].h, comps[0].ph / comps[0].v);
    for y in 0..my {
        for x in 0..mx {
            for (i, c) in comps.iter().enumerate() {
                for by in 0..c.v {
                    let row = (y * c.v + by) * c.pw + x * c.h;
                    for b in &c.coefs[row..row + c.h] {
                        f.block(i, b);
                    }
                }
            }
        }
    }
}

/// `scan_order` over buffers holding one MCU row of each component (a one-component scan: of
/// its real blocks).
#[inline(always)]
fn scan_mcu_row<'a>(comps: &[&'a Component], f: &mut impl Visit<'a>) {
    if let [c] = comps {
        for b in &c.coefs[..c.wblocks] {
            f.block(0, b);
        }
        return;
    }
    for x in 0..comps[0].pw / comps[0].h {
        for (i, c) in comps.iter().enumerate() {
            for by in 0..c.v {
                let row = by * c.pw + x * c.h;
                for b in &c.coefs[row..row + c.h] {
                    f.block(i, b);
                }
            }
        }
    }
}

/// The DHT segments of a baseline scan's tables (`dc[t]`, `ac[t]` for table t) and its SOS.
pub(crate) fn baseline_headers(comps: &[Component], dc: &[Table], ac: &[Table], out: &mut Vec<u8>) {
    for (t, (dc, ac)) in dc.iter().zip(ac).enumerate() {
        dc.write_dht(t as u8, out);
        ac.write_dht(0x10 | t as u8, out);
    }
    let len = 6 + 2 * comps.len();
    out.extend_from_slice(&[0xFF, 0xDA, 0, len as u8, comps.len() as u8]);
    for c in comps {
        out.extend_from_slice(&[c.id, (c.table << 4 | c.table) as u8]);
    }
    out.extend_from_slice(&[0, 63, 0]);
}

/// The Annex K tables of a frame with `ntables` table pairs: (DC, AC).
pub(crate) fn std_tables(ntables: usize) -> (Vec<Table>, Vec<Table>) {
    let (mut dc, mut ac) = (
        vec![Table::std_dc_luma(), Table::std_dc_chroma()],
        vec![Table::std_ac_luma(), Table::std_ac_chroma()],
    );
    dc.truncate(ntables);
    ac.truncate(ntables);
    (dc, ac)
}

/// One sequential scan of every component: DHT, SOS, the entropy-coded data. Built twice:
/// portable, and with AVX2 (the zero test of a block's coefficients) and BMI1/LZCNT (the
/// bit counts) where the CPU has them. `encode` calls it for optimised tables (the standard
/// ones go MCU row by MCU row, `streamed`, and the tests hold that against this).
fn baseline(comps: &[Component], optimize: bool, out: &mut Vec<u8>) {
    #[cfg(target_arch = "x86_64")]
    if coder_features() {
        // SAFETY: the features are present (checked just above).
        unsafe { baseline_avx2(comps, optimize, out) };
        return;
    }
    baseline_scalar(comps, optimize, out);
}

/// The portable build of `baseline` (and the twin the vector build is tested against).
pub(super) fn baseline_scalar(comps: &[Component], optimize: bool, out: &mut Vec<u8>) {
    baseline_body::<false>(comps, optimize, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,lzcnt")]
pub(super) unsafe fn baseline_avx2(comps: &[Component], optimize: bool, out: &mut Vec<u8>) {
    baseline_body::<true>(comps, optimize, out);
}

/// A block's `huffman::ac_mask`, by AVX2 where `AVX2` (only inside a build with it).
#[inline(always)]
fn mask<const AVX2: bool>(b: &[i16; 64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if AVX2 {
        // SAFETY: AVX2 builds are called only where the CPU has AVX2 (`baseline`).
        return unsafe { huffman::ac_mask_avx2(b) };
    }
    huffman::ac_mask(b)
}

/// Counts a baseline scan's symbols for the optimal tables.
struct Counter<const AVX2: bool> {
    tables: [usize; 3],
    last: [i32; 3],
    dc: [[u64; 256]; 2],
    ac: [[u64; 256]; 2],
}

impl<const AVX2: bool> Visit<'_> for Counter<AVX2> {
    #[inline(always)]
    fn block(&mut self, i: usize, b: &[i16; 64]) {
        let t = self.tables[i];
        huffman::count_block(
            b,
            mask::<AVX2>(b),
            &mut self.last[i],
            &mut self.dc[t],
            &mut self.ac[t],
        );
    }
}

/// Codes a baseline scan's blocks.
struct Coder<'w, 'c, const AVX2: bool> {
    w: BitWriter<'w>,
    tables: [usize; 3],
    last: [i32; 3],
    dc: [&'c [u64; 256]; 2],
    ac: [&'c [u64; 256]; 2],
}

impl<const AVX2: bool> Visit<'_> for Coder<'_, '_, AVX2> {
    #[inline(always)]
    fn block(&mut self, i: usize, b: &[i16; 64]) {
        let t = self.tables[i];
        let (dc, ac) = (self.dc[t], self.ac[t]);
        huffman::encode_block(&mut self.w, b, mask::<AVX2>(b), &mut self.last[i], dc, ac);
    }
}

#[inline(always)]
fn baseline_body<const AVX2: bool>(comps: &[Component], optimize: bool, out: &mut Vec<u8>) {
    let all: Vec<&Component> = comps.iter().collect();
    let ntables = if comps.len() == 1 { 1 } else { 2 };
    let mut tables = [0; 3];
    for (t, c) in tables.iter_mut().zip(comps) {
        *t = c.table;
    }
    let (dc, ac): (Vec<Table>, Vec<Table>) = if optimize {
        let mut counter = Counter::<AVX2> {
            tables,
            last: [0; 3],
            dc: [[0; 256]; 2],
            ac: [[0; 256]; 2],
        };
        scan_order(&all, &mut counter);
        (
            counter.dc[..ntables].iter().map(Table::optimal).collect(),
            counter.ac[..ntables].iter().map(Table::optimal).collect(),
        )
    } else {
        std_tables(ntables)
    };
    baseline_headers(comps, &dc, &ac, out);
    let dcc: Vec<_> = dc.iter().map(Table::folded).collect();
    let acc: Vec<_> = ac.iter().map(Table::folded).collect();
    let last = ntables - 1;
    let mut coder = Coder::<AVX2> {
        w: BitWriter::new(out),
        tables,
        last: [0; 3],
        dc: [&dcc[0], &dcc[last]],
        ac: [&acc[0], &acc[last]],
    };
    scan_order(&all, &mut coder);
    coder.w.finish();
}

#[cfg(test)]
mod tests;

//! The GPU passes of a baseline JPEG: blocks (colour, downsampling, DCT, quantisation), the
//! symbol histogram and the optimal tables built from it, bit lengths, their scan into
//! offsets, packing, the 0xFF counts, their scan and the stuffing, all recorded into the
//! batch that makes the samples (one submission a file), with buffers sized for the worst
//! case so that nothing waits for the host. One mapping brings back the bit and 0xFF counts,
//! the tables, the pass times and the stream (a prefix sized by the last file; a longer
//! stream's rest is read after it).

use anyhow::{bail, Result};

use crate::gpu::{Batch, Gpu, Kernel, PassTime, Usage};
use crate::io::jpeg::{Component, Divisors, Frame, Table};
use crate::ops::scan::{self, ScanPlan};
use crate::shader;
use crate::tune::Tunable;

use super::Tunables;

/// `Params` of wgsl/shared/encode_frame.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub(super) struct EncodeParams {
    width: u32,
    height: u32,
    channels: u32,
    mcus_x: u32,
    blocks_per_mcu: u32,
    nblocks: u32,
    nwords: u32,
    _pad: u32,
    comp: [[u32; 4]; 3],
    place: [[u32; 4]; 3],
}

crate::ops::params_layout!(EncodeParams {
    width,
    height,
    channels,
    mcus_x,
    blocks_per_mcu,
    nblocks,
    nwords,
    comp,
    place
});

/// The most bits one block can take (a 27-bit DC, 63 AC symbols of at most 26 bits): the
/// bound that keeps every bit offset within a u32.
const MAX_BLOCK_BITS: u64 = 27 + 63 * 26;

/// Every shader the encoder builds, for the shader tests.
pub(super) fn shaders() -> Vec<crate::ops::ShaderCase> {
    use crate::ops::ShaderCase;
    [
        "encode_dct",
        "encode_huffman",
        "encode_tables",
        "encode_stuff",
    ]
    .map(|name| {
        let shader = match name {
            "encode_dct" => shader!("encode_dct"),
            "encode_huffman" => shader!("encode_huffman"),
            "encode_tables" => shader!("encode_tables"),
            _ => shader!("encode_stuff"),
        };
        let case = ShaderCase::params::<EncodeParams>(shader);
        match name {
            "encode_tables" => case.with_const(
                "DHT_WORDS",
                u32::try_from(DHT_WORDS).expect("a table's words fit 32 bits"),
            ),
            _ => case,
        }
    })
    .into()
}

impl EncodeParams {
    /// The frame's layout as the kernels read it (wgsl/shared/encode_frame.wgsl).
    pub(super) fn new(frame: &Frame) -> EncodeParams {
        let comps = &frame.comps;
        let mut p = EncodeParams {
            width: frame.width,
            height: frame.height,
            channels: if comps.len() == 1 { 1 } else { 3 },
            mcus_x: (comps[0].pw / comps[0].h) as u32,
            ..EncodeParams::default()
        };
        let mut first = 0;
        for (k, c) in comps.iter().enumerate() {
            p.comp[k] = [c.h, c.v, c.wblocks, c.hblocks].map(|x| x as u32);
            p.place[k] = [c.pw as u32, c.table as u32, first, 0];
            first += (c.h * c.v) as u32;
        }
        p.blocks_per_mcu = first;
        p.nblocks = blocks(comps) as u32;
        p
    }
}

/// Blocks in the scan: one component's real blocks, or every MCU's blocks, dummies included.
pub(super) fn blocks(comps: &[Component]) -> u64 {
    match comps {
        [c] => (c.wblocks * c.hblocks) as u64,
        _ => comps.iter().map(|c| (c.pw * c.ph) as u64).sum(),
    }
}

/// The most 32-bit words the coded bits of `n` blocks take: every block at its longest.
fn max_words(n: u64) -> u64 {
    (n * MAX_BLOCK_BITS).div_ceil(32)
}

/// Whether a frame fits the GPU passes on `gpu`: every bit offset within a u32, and every
/// buffer within one storage binding: the samples, and the stuffed output at its worst (every
/// block at its longest, every byte 0xFF), the largest of the others. Else the CPU encodes it.
pub(super) fn fits(gpu: &Gpu, frame: &Frame, samples: usize) -> bool {
    let n = blocks(&frame.comps);
    let max = gpu.limits.max_storage_buffer_binding_size;
    n * MAX_BLOCK_BITS < u64::from(u32::MAX)
        && 8 * max_words(n) + 16 <= max
        && (samples as u64).next_multiple_of(4) <= max
}

/// The Huffman codes of a frame's tables as the kernels read them: at t * 512 + class * 256
/// + symbol, code | length << 16.
fn code_words(dc: &[Table], ac: &[Table]) -> Vec<u32> {
    let mut words = vec![0u32; 1024];
    for (t, (dc, ac)) in dc.iter().zip(ac).enumerate() {
        for (class, table) in [dc, ac].into_iter().enumerate() {
            let codes = table.codes();
            for s in 0..256 {
                words[t * 512 + class * 256 + s] = codes.code[s] | u32::from(codes.size[s]) << 16;
            }
        }
    }
    words
}

/// Words a table takes in the tables kernel's output: bits[0..17], then up to 256 symbols:
/// `DHT_WORDS` of wgsl/encode_tables.wgsl (the shader test checks they agree).
const DHT_WORDS: u64 = 273;
/// The read-back's layout: the bit count, the 0xFF count, the tables (four), the pass times
/// (16 bytes a pass), then the stream's first bytes.
const DHT_AT: u64 = 8;
const TIMES_AT: u64 = DHT_AT + 4 * DHT_WORDS * 4;
/// Passes a file's batch times: the op's that make the samples (a blur's few) and the
/// encoder's dozen.
pub(super) const TIMED_PASSES: u32 = 64;
const STREAM_AT: u64 = TIMES_AT + 16 * TIMED_PASSES as u64;

/// Where the encoder reads the samples (gray or RGB, a byte each, rows packed).
pub(super) enum Source<'a> {
    /// On the host: uploaded.
    Host(&'a [u8]),
    /// Made on the device by passes recorded into the file's batch (another op's result),
    /// read where it is.
    Recorded(&'a mut dyn FnMut(&mut Batch) -> Result<wgpu::Buffer>),
}

/// What a plan was made for: a frame's layout, its quantisation and the table mode.
#[derive(PartialEq)]
struct Key {
    params: EncodeParams,
    divisors: Vec<[u32; 4]>,
    optimize: bool,
    t: Tunables,
}

impl PartialEq for EncodeParams {
    fn eq(&self, other: &Self) -> bool {
        bytemuck::bytes_of(self) == bytemuck::bytes_of(other)
    }
}

/// One frame shape's encode on the device, kept from one file to the next of the same shape
/// and settings: its kernels, buffers (sized for the worst case), bind groups and read-back.
pub(super) struct EncodePlan {
    key: Key,
    params: EncodeParams,
    ntables: u32,
    dct: Kernel,
    count: Kernel,
    tables: Kernel,
    lens: Kernel,
    pack: Kernel,
    ff_count: Kernel,
    stuff: Kernel,
    params_buf: wgpu::Buffer,
    divisors: wgpu::Buffer,
    /// The samples, when they come from the host.
    host: Option<wgpu::Buffer>,
    coefs: wgpu::Buffer,
    hist: wgpu::Buffer,
    /// Held for the bind groups.
    _codes: wgpu::Buffer,
    dht: wgpu::Buffer,
    offsets: ScanPlan,
    words: wgpu::Buffer,
    shifts: ScanPlan,
    out: wgpu::Buffer,
    count_bind: wgpu::BindGroup,
    tables_bind: wgpu::BindGroup,
    huffman_bind: [wgpu::BindGroup; 2],
    ff_bind: wgpu::BindGroup,
    stuff_bind: wgpu::BindGroup,
    /// The read-back, and how many of the stream's bytes it takes (the last file's length
    /// and an eighth; a longer stream's rest is read after it).
    staging: wgpu::Buffer,
    prefix: u64,
}

impl EncodePlan {
    /// Builds the kernels and buffers for `frame` (with Annex K tables unless `optimize`).
    pub(super) fn new(gpu: &Gpu, frame: &Frame, optimize: bool, t: Tunables) -> Result<EncodePlan> {
        t.check(&gpu.limits)?;
        let mut params = EncodeParams::new(frame);
        let n = u64::from(params.nblocks);
        let cap = max_words(n);
        params.nwords = u32::try_from(cap)?;
        let ntables = if frame.comps.len() == 1 { 1 } else { 2 };
        let wg = |w: u32| [("WG_SIZE", f64::from(w))];
        // One MCU a workgroup, its shape fixed by the block size; one table a workgroup.
        let dct = gpu.kernel(&shader!("encode_dct"), "main", &[])?;
        let tables = gpu.kernel(&shader!("encode_tables"), "main", &[])?;
        let huffman = shader!("encode_huffman");
        let count = gpu.kernel(&huffman, "count", &wg(t.huffman_wg))?;
        let lens = gpu.kernel(&huffman, "lens", &wg(t.huffman_wg))?;
        let pack = gpu.kernel(&huffman, "pack", &wg(t.huffman_wg))?;
        let ff_count = gpu.kernel(&shader!("encode_stuff"), "count", &wg(t.stuff_wg))?;
        let stuff = gpu.kernel(&shader!("encode_stuff"), "stuff", &wg(t.stuff_wg))?;

        let divisor_words: Vec<[u32; 4]> = frame
            .tables
            .iter()
            .flat_map(|t| Divisors::new(t).words())
            .collect();
        let divisors = gpu.upload("encode divisors", Usage::Storage, &divisor_words);
        let params_buf = gpu.upload("encode params", Usage::Uniform, &[params]);
        let coefs = gpu.buffer("encode blocks", Usage::Storage, n * 128);
        let hist = gpu.buffer("encode histogram", Usage::Storage, 1024 * 4);
        // Optimal tables are built on the device into `codes`; Annex K's are written once.
        let codes = if optimize {
            gpu.buffer("encode codes", Usage::Storage, 1024 * 4)
        } else {
            let (dc, ac) = crate::io::jpeg::std_tables(ntables as usize);
            gpu.upload("encode codes", Usage::Storage, &code_words(&dc, &ac))
        };
        let dht = gpu.buffer("encode tables", Usage::Storage, 4 * DHT_WORDS * 4);
        let scan_opts = scan::Options::default().resolved(gpu, n as usize + 1);
        let offsets = ScanPlan::new::<u32>(gpu, n as usize + 1, &scan_opts)?;
        let scan_opts = scan::Options::default().resolved(gpu, cap as usize + 1);
        let shifts = ScanPlan::new::<u32>(gpu, cap as usize + 1, &scan_opts)?;
        let (Some(offsets_buf), Some(shifts_buf)) =
            (offsets.single_buffer(), shifts.single_buffer())
        else {
            bail!("{n} blocks are more than one scan segment holds");
        };
        let words = gpu.buffer("encode words", Usage::Storage, cap * 4 + 4);
        // Every byte may be 0xFF and take a 0x00 after it.
        let out = gpu.buffer("encode out", Usage::Storage, cap * 8 + 8);
        // Each kernel's bind group (each pipeline has its own layout: a binding its entry
        // point does not use is left out, so those come last).
        let count_bind = gpu.bind(&count, &[&params_buf, &coefs, &codes, &hist, &words]);
        let tables_bind = gpu.bind(&tables, &[&params_buf, &hist, &codes, &dht]);
        let huffman_bind = [&lens, &pack].map(|k| {
            gpu.bind(
                k,
                &[&params_buf, &coefs, &codes, &hist, &words, offsets_buf],
            )
        });
        let ff_bind = gpu.bind(&ff_count, &[&params_buf, &words, offsets_buf, shifts_buf]);
        let stuff_bind = gpu.bind(
            &stuff,
            &[&params_buf, &words, offsets_buf, shifts_buf, &out],
        );
        // A photo's stream is a tenth of its samples or less; the first file settles it.
        let samples = u64::from(frame.width) * u64::from(frame.height) * frame.comps.len() as u64;
        let prefix = (samples / 4 + 4096).next_multiple_of(4).min(out.size());
        let staging = staging(gpu, prefix);
        Ok(EncodePlan {
            key: Key {
                params,
                divisors: divisor_words,
                optimize,
                t,
            },
            params,
            ntables,
            dct,
            count,
            tables,
            lens,
            pack,
            ff_count,
            stuff,
            params_buf,
            divisors,
            host: None,
            coefs,
            hist,
            _codes: codes,
            dht,
            offsets,
            words,
            shifts,
            out,
            count_bind,
            tables_bind,
            huffman_bind,
            ff_bind,
            stuff_bind,
            staging,
            prefix,
        })
    }

    /// Whether the plan encodes `frame` with these settings.
    pub(super) fn fits(&self, frame: &Frame, optimize: bool, t: Tunables) -> bool {
        let mut params = EncodeParams::new(frame);
        params.nwords = self.params.nwords;
        let divisors: Vec<[u32; 4]> = frame
            .tables
            .iter()
            .flat_map(|t| Divisors::new(t).words())
            .collect();
        self.key
            == Key {
                params,
                divisors,
                optimize,
                t,
            }
    }

    /// The samples' buffer for `source`: the host's written into the plan's own (queued
    /// before the batch), or what the passes `source` records into `batch` make.
    pub(super) fn samples(
        &mut self,
        gpu: &Gpu,
        batch: &mut Batch,
        source: Source,
    ) -> Result<wgpu::Buffer> {
        match source {
            Source::Host(bytes) => Ok(self.host_samples(gpu, bytes)),
            Source::Recorded(record) => record(batch),
        }
    }

    /// `bytes` written (at the next submission) into the plan's own samples buffer.
    pub(super) fn host_samples(&mut self, gpu: &Gpu, bytes: &[u8]) -> wgpu::Buffer {
        let size = (bytes.len() as u64).next_multiple_of(4).max(16);
        let buf = match self.host.take() {
            Some(b) if b.size() == size => b,
            _ => gpu.buffer("encode samples", Usage::Storage, size),
        };
        gpu.write_padded(&buf, bytes);
        self.host = Some(buf.clone());
        buf
    }

    /// Records every pass of the encode of `src` and the copies to the read-back.
    pub(super) fn record(&self, gpu: &Gpu, batch: &mut Batch, src: &wgpu::Buffer) {
        let p = &self.params;
        let n = p.nblocks;
        let dct_bind = gpu.bind(
            &self.dct,
            &[&self.params_buf, src, &self.divisors, &self.coefs],
        );
        batch.dispatch("encode_dct", &self.dct, &dct_bind, n / p.blocks_per_mcu);
        let hwg = self.key.t.huffman_wg;
        let swg = self.key.t.stuff_wg;
        if self.key.optimize {
            batch.clear_buffer(&self.hist);
            batch.dispatch(
                "encode_count",
                &self.count,
                &self.count_bind,
                n.div_ceil(hwg),
            );
            batch.dispatch(
                "encode_tables",
                &self.tables,
                &self.tables_bind,
                2 * self.ntables,
            );
        }
        batch.dispatch(
            "encode_lens",
            &self.lens,
            &self.huffman_bind[0],
            (n + 1).div_ceil(hwg),
        );
        self.offsets.record(batch);
        batch.clear_buffer(&self.words);
        batch.clear_buffer(&self.out);
        batch.dispatch(
            "encode_pack",
            &self.pack,
            &self.huffman_bind[1],
            n.div_ceil(hwg),
        );
        let cap = p.nwords;
        batch.dispatch(
            "encode_ff_count",
            &self.ff_count,
            &self.ff_bind,
            (cap + 1).div_ceil(swg),
        );
        self.shifts.record(batch);
        batch.dispatch(
            "encode_stuff",
            &self.stuff,
            &self.stuff_bind,
            cap.div_ceil(swg),
        );
        let offsets = self.offsets.single_buffer().expect("checked in new");
        let shifts = self.shifts.single_buffer().expect("checked in new");
        batch.copy_at(offsets, u64::from(n) * 4, &self.staging, 0, 4);
        batch.copy_at(shifts, u64::from(cap) * 4, &self.staging, 4, 4);
        if self.key.optimize {
            let size = 2 * u64::from(self.ntables) * DHT_WORDS * 4;
            batch.copy_at(&self.dht, 0, &self.staging, DHT_AT, size);
        }
        batch.copy_at(&self.out, 0, &self.staging, STREAM_AT, self.prefix);
    }

    /// Submits `batch` (with [`EncodePlan::record`]'s passes) and writes the file: the
    /// headers (`write_headers`, then the tables and the SOS), the stream and EOI. One wait
    /// and one mapping; a stream longer than the prefix read with it has its rest read
    /// after, and the next file's prefix made longer.
    pub(super) fn submit(
        &mut self,
        gpu: &Gpu,
        batch: Batch,
        frame: &Frame,
        write_headers: impl FnOnce(&mut Vec<u8>) -> Result<()>,
        out: &mut Vec<u8>,
    ) -> Result<Vec<PassTime>> {
        let ntables = self.ntables as usize;
        let optimize = self.key.optimize;
        let prefix = self.prefix;
        let (len, times) = batch.submit_read(&self.staging, TIMES_AT, |view| {
            let word = |at: usize| u32::from_le_bytes(view[at..at + 4].try_into().expect("4"));
            let bytes = u64::from(word(0)).div_ceil(8) + u64::from(word(4));
            let (dc, ac) = if optimize {
                let table = |k: usize| {
                    let at = DHT_AT as usize + k * DHT_WORDS as usize * 4;
                    let w = |i: usize| word(at + 4 * i) as u8;
                    let bits: [u8; 17] = std::array::from_fn(w);
                    let count: usize = bits[1..].iter().map(|&b| usize::from(b)).sum();
                    let vals = (0..count.min(256)).map(|i| w(17 + i)).collect();
                    Table { bits, vals }
                };
                (0..ntables)
                    .map(|t| (table(2 * t), table(2 * t + 1)))
                    .unzip()
            } else {
                crate::io::jpeg::std_tables(ntables)
            };
            write_headers(out)?;
            crate::io::jpeg::baseline_headers(&frame.comps, &dc, &ac, out);
            let first = bytes.min(prefix) as usize;
            let at = STREAM_AT as usize;
            out.extend_from_slice(&view[at..at + first]);
            Ok::<u64, anyhow::Error>(bytes)
        })?;
        let len = len?;
        if len > prefix {
            gpu.read_with(&self.out, prefix, len - prefix, |b| {
                out.extend_from_slice(b)
            })?;
            self.prefix = (len + len / 8 + 4096)
                .next_multiple_of(4)
                .min(self.out.size());
            self.staging = staging(gpu, self.prefix);
        }
        out.extend_from_slice(&[0xFF, 0xD9]);
        Ok(times)
    }
}

/// The read-back buffer of a plan whose stream prefix is `prefix` bytes.
fn staging(gpu: &Gpu, prefix: u64) -> wgpu::Buffer {
    // MAP_READ to be read in place, COPY_DST for the batch to copy into.
    gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("encode read-back"),
        size: STREAM_AT + prefix,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// The optimal tables the device builds from `counts` (DC luma, AC luma, DC chroma, AC
/// chroma: the histogram's order), as the DHT segments hold them, and the codes the coding
/// passes read (code | length << 16 by symbol): `encode_tables` alone, for its tests.
#[cfg(test)]
pub(super) fn device_tables(gpu: &Gpu, counts: &[[u32; 256]; 4]) -> Result<(Vec<Table>, Vec<u32>)> {
    let params = EncodeParams {
        channels: 3,
        ..EncodeParams::default()
    };
    let kernel = gpu.kernel(&shader!("encode_tables"), "main", &[])?;
    let params = gpu.upload("encode params", Usage::Uniform, &[params]);
    let hist = gpu.upload("encode histogram", Usage::Storage, counts.as_flattened());
    let codes = gpu.buffer("encode codes", Usage::Storage, 1024 * 4);
    let dht = gpu.buffer("encode tables", Usage::Storage, 4 * DHT_WORDS * 4);
    let bind = gpu.bind(&kernel, &[&params, &hist, &codes, &dht]);
    let mut batch = gpu.batch(None);
    batch.dispatch("encode_tables", &kernel, &bind, 4);
    batch.submit()?;
    let words: Vec<u32> = gpu.read_vec(&dht, 4 * DHT_WORDS as usize)?;
    let tables = words
        .chunks(DHT_WORDS as usize)
        .map(|w| {
            let bits: [u8; 17] = std::array::from_fn(|i| w[i] as u8);
            let count: usize = bits[1..].iter().map(|&b| usize::from(b)).sum();
            let vals = w[17..17 + count].iter().map(|&v| v as u8).collect();
            Table { bits, vals }
        })
        .collect();
    Ok((tables, gpu.read_vec(&codes, 1024)?))
}

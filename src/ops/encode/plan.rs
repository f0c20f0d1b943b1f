//! The GPU passes of a baseline JPEG: blocks (colour, downsampling, DCT, quantisation), the
//! symbol histogram for optimised tables, bit lengths, their scan into offsets, packing,
//! the 0xFF counts, their scan and the stuffing. Two submissions: the second is sized by the
//! total bit count the first reads back (4 bytes); only the stuffed stream comes back after it.

use anyhow::{bail, Context, Result};

use crate::gpu::{Batch, Gpu, Kernel, Usage};
use crate::io::jpeg::{Component, Divisors, Frame, Table};
use crate::ops::scan::{self, ScanPlan};
use crate::shader;
use crate::tune::Tunable;

use super::Tunables;

/// Keep in sync with `Params` in wgsl/shared/encode_frame.wgsl.
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
    ["encode_dct", "encode_huffman", "encode_stuff"]
        .map(|name| {
            let shader = match name {
                "encode_dct" => shader!("encode_dct"),
                "encode_huffman" => shader!("encode_huffman"),
                _ => shader!("encode_stuff"),
            };
            ShaderCase::params::<EncodeParams>(shader)
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

/// Whether a frame fits the GPU passes on `gpu`: every bit offset within a u32, and every
/// buffer within one storage binding: the samples, and the stuffed output at its worst (every
/// block at its longest, every byte 0xFF), the largest of the others. Else the CPU encodes it.
pub(super) fn fits(gpu: &Gpu, frame: &Frame, samples: usize) -> bool {
    let n = blocks(&frame.comps);
    let max = gpu.limits.max_storage_buffer_binding_size;
    let worst_bytes = (n * MAX_BLOCK_BITS).div_ceil(8) + 8;
    n * MAX_BLOCK_BITS < u64::from(u32::MAX)
        && 2 * worst_bytes <= max
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

/// Where the encoder reads the samples (gray or RGB, a byte each, rows packed).
pub(super) enum Source<'a> {
    /// On the host: uploaded.
    Host(&'a [u8]),
    /// Already on the device (another op's result), read where it is.
    Device(&'a wgpu::Buffer),
}

/// One image's encode on the device: the buffers of both submissions and their passes.
pub(super) struct EncodePlan {
    params: EncodeParams,
    t: Tunables,
    dct: Kernel,
    count: Kernel,
    lens: Kernel,
    pack: Kernel,
    ff_count: Kernel,
    stuff: Kernel,
    dct_bind: wgpu::BindGroup,
    params_buf: wgpu::Buffer,
    coefs: wgpu::Buffer,
    hist: wgpu::Buffer,
    offsets: ScanPlan,
    /// Made once the bit count is known.
    tail: Option<Tail>,
    /// The sample and divisor buffers, held for the bind group.
    _held: Vec<wgpu::Buffer>,
}

/// The second submission's buffers: the coded words, the stuffing shifts and the output.
struct Tail {
    words: wgpu::Buffer,
    shifts: ScanPlan,
    out: wgpu::Buffer,
    /// Bytes of coded data before stuffing.
    bytes: u64,
    lens_bind: wgpu::BindGroup,
    pack_bind: wgpu::BindGroup,
    ff_bind: wgpu::BindGroup,
    stuff_bind: wgpu::BindGroup,
    /// The code words and the params with the word count, held for the bind groups.
    _held: [wgpu::Buffer; 2],
}

impl EncodePlan {
    /// Uploads `samples` (gray or RGB, as `frame` says) and builds the kernels.
    pub(super) fn new(
        gpu: &Gpu,
        frame: &Frame,
        samples: Source,
        t: Tunables,
    ) -> Result<EncodePlan> {
        t.check(&gpu.limits)?;
        let params = EncodeParams::new(frame);
        let n = params.nblocks as usize;
        let wg = |w: u32| [("WG_SIZE", f64::from(w))];
        // One MCU a workgroup, its shape fixed by the block size.
        let dct = gpu.kernel(&shader!("encode_dct"), "main", &[])?;
        let huffman = shader!("encode_huffman");
        let count = gpu.kernel(&huffman, "count", &wg(t.huffman_wg))?;
        let lens = gpu.kernel(&huffman, "lens", &wg(t.huffman_wg))?;
        let pack = gpu.kernel(&huffman, "pack", &wg(t.huffman_wg))?;
        let ff_count = gpu.kernel(&shader!("encode_stuff"), "count", &wg(t.stuff_wg))?;
        let stuff = gpu.kernel(&shader!("encode_stuff"), "stuff", &wg(t.stuff_wg))?;

        let src = match samples {
            Source::Host(bytes) => {
                // Padded to whole words.
                let src = gpu.buffer(
                    "encode samples",
                    Usage::Storage,
                    bytes.len().next_multiple_of(4) as u64,
                );
                gpu.write_padded(&src, bytes);
                src
            }
            Source::Device(buffer) => buffer.clone(),
        };
        let divisors: Vec<[u32; 4]> = frame
            .tables
            .iter()
            .flat_map(|t| Divisors::new(t).words())
            .collect();
        let divisors = gpu.upload("encode divisors", Usage::Storage, &divisors);
        let params_buf = gpu.upload("encode params", Usage::Uniform, &[params]);
        let coefs = gpu.buffer("encode blocks", Usage::Storage, n as u64 * 128);
        let hist = gpu.buffer("encode histogram", Usage::Storage, 1024 * 4);
        let scan_opts = scan::Options::default().resolved(gpu, n + 1);
        let offsets = ScanPlan::new::<u32>(gpu, n + 1, &scan_opts)?;
        if offsets.single_buffer().is_none() {
            bail!("{n} blocks are more than one scan segment holds");
        }
        let dct_bind = gpu.bind(&dct, &[&params_buf, &src, &divisors, &coefs]);
        Ok(EncodePlan {
            params,
            t,
            dct,
            count,
            lens,
            pack,
            ff_count,
            stuff,
            dct_bind,
            params_buf,
            coefs,
            hist,
            offsets,
            tail: None,
            _held: vec![src, divisors],
        })
    }

    fn offsets_buf(&self) -> &wgpu::Buffer {
        self.offsets.single_buffer().expect("checked in new")
    }

    /// The blocks, and with `count` their symbol histogram.
    pub(super) fn record_blocks(&self, gpu: &Gpu, batch: &mut Batch, count: bool) {
        let blocks = self.params.nblocks;
        batch.dispatch(
            "encode_dct",
            &self.dct,
            &self.dct_bind,
            blocks / self.params.blocks_per_mcu,
        );
        if count {
            batch.clear_buffer(&self.hist);
            // The histogram pass reads no codes and writes no coded words, but its shader
            // names them: small stand-ins fill their bindings.
            let codes = gpu.buffer("encode no codes", Usage::Storage, 16);
            let words = gpu.buffer("encode no words", Usage::Storage, 16);
            let bind = gpu.bind(
                &self.count,
                &[&self.params_buf, &self.coefs, &codes, &self.hist, &words],
            );
            batch.dispatch(
                "encode_count",
                &self.count,
                &bind,
                blocks.div_ceil(self.t.huffman_wg),
            );
        }
    }

    /// The symbol counts of the last `record_blocks(.., true)`: (DC, AC) per table.
    pub(super) fn read_counts(&self, gpu: &Gpu, tables: usize) -> Result<Vec<[[u64; 256]; 2]>> {
        let hist: Vec<u32> = gpu.read_vec(&self.hist, 1024)?;
        Ok((0..tables)
            .map(|t| {
                [0, 1].map(|class| {
                    std::array::from_fn(|s| u64::from(hist[t * 512 + class * 256 + s]))
                })
            })
            .collect())
    }

    /// Sets the tables and sizes the second submission for them: runs the bit lengths and
    /// their scan, and reads the total back.
    pub(super) fn size_for(&mut self, gpu: &Gpu, dc: &[Table], ac: &[Table]) -> Result<()> {
        let codes = gpu.upload("encode codes", Usage::Storage, &code_words(dc, ac));
        let n = self.params.nblocks;
        // The first lengths pass writes no coded words: a stand-in fills their binding.
        let spare = gpu.buffer("encode no words", Usage::Storage, 16);
        let bind = |kernel: &Kernel, words: &wgpu::Buffer| {
            gpu.bind(
                kernel,
                &[
                    &self.params_buf,
                    &self.coefs,
                    &codes,
                    &self.hist,
                    words,
                    self.offsets_buf(),
                ],
            )
        };
        let mut batch = gpu.batch(None);
        self.record_lens(&mut batch, &bind(&self.lens, &spare));
        batch.submit()?;
        let total = gpu.read(self.offsets_buf(), u64::from(n) * 4, 4)?;
        let bits = u64::from(u32::from_le_bytes(total[..4].try_into().expect("4 bytes")));
        let bytes = bits.div_ceil(8);
        let nwords = bytes.div_ceil(4);
        let params = EncodeParams {
            nwords: nwords as u32,
            ..self.params
        };
        let params = gpu.upload("encode params", Usage::Uniform, &[params]);
        let words = gpu.buffer("encode words", Usage::Storage, nwords * 4);
        let scan_opts = scan::Options::default().resolved(gpu, nwords as usize + 1);
        let shifts = ScanPlan::new::<u32>(gpu, nwords as usize + 1, &scan_opts)?;
        let shifts_buf = shifts
            .single_buffer()
            .context("the coded words are more than one scan segment holds")?;
        // Every byte may be 0xFF and take a 0x00 after it.
        let out = gpu.buffer("encode out", Usage::Storage, nwords * 8);
        // Each kernel's bind group (each pipeline has its own layout).
        let lens_bind = bind(&self.lens, &words);
        let pack_bind = bind(&self.pack, &words);
        let ff_bind = gpu.bind(&self.ff_count, &[&params, &words, shifts_buf]);
        let stuff_bind = gpu.bind(&self.stuff, &[&params, &words, shifts_buf, &out]);
        self.tail = Some(Tail {
            words,
            shifts,
            out,
            bytes,
            lens_bind,
            pack_bind,
            ff_bind,
            stuff_bind,
            _held: [codes, params],
        });
        Ok(())
    }

    fn record_lens(&self, batch: &mut Batch, bind: &wgpu::BindGroup) {
        let n = self.params.nblocks;
        batch.dispatch(
            "encode_lens",
            &self.lens,
            bind,
            (n + 1).div_ceil(self.t.huffman_wg),
        );
        self.offsets.record(batch);
    }

    /// The lengths, offsets, packing and stuffing, with the tables `size_for` set.
    pub(super) fn record_tail(&self, batch: &mut Batch) {
        let tail = self.tail.as_ref().expect("size_for ran");
        self.record_lens(batch, &tail.lens_bind);
        batch.clear_buffer(&tail.words);
        batch.clear_buffer(&tail.out);
        let n = self.params.nblocks;
        batch.dispatch(
            "encode_pack",
            &self.pack,
            &tail.pack_bind,
            n.div_ceil(self.t.huffman_wg),
        );
        let nwords = tail.bytes.div_ceil(4) as u32;
        batch.dispatch(
            "encode_ff_count",
            &self.ff_count,
            &tail.ff_bind,
            (nwords + 1).div_ceil(self.t.stuff_wg),
        );
        tail.shifts.record(batch);
        batch.dispatch(
            "encode_stuff",
            &self.stuff,
            &tail.stuff_bind,
            nwords.div_ceil(self.t.stuff_wg),
        );
    }

    /// The stuffed entropy-coded bytes of the last `record_tail`.
    pub(super) fn read_stream(&self, gpu: &Gpu, out: &mut Vec<u8>) -> Result<()> {
        let tail = self.tail.as_ref().expect("size_for ran");
        let nwords = tail.bytes.div_ceil(4);
        let buf = tail.shifts.single_buffer().expect("checked in size_for");
        let ff = gpu.read(buf, nwords * 4, 4)?;
        let ff = u64::from(u32::from_le_bytes(ff[..4].try_into().expect("4 bytes")));
        gpu.read_with(&tail.out, 0, tail.bytes + ff, |b| out.extend_from_slice(b))
    }
}

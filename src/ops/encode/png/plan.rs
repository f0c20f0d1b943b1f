//! The GPU passes of a PNG's image data: the rows filtered with each workgroup's Adler-32
//! sums, each piece's bit length, their scan into offsets, the packing, and the copies to the
//! host's read-back buffer; one submission (with the passes that made the image, where it
//! was made on the device), one wait and one mapping an image, the plan kept for the next
//! image of the layout.

use anyhow::{bail, Result};

use crate::gpu::{Batch, Gpu, Kernel, PassTime, PassTimer, Usage};
use crate::ops::scan::{self, ScanPlan};
use crate::shader;
use crate::tune::Tunable;

use super::deflate::{self, HEADER, HEADER_BITS};
use super::{Layout, Tunables};

/// `Params` of wgsl/shared/encode_png.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub(super) struct PngParams {
    row_len: u32,
    height: u32,
    bpp: u32,
    swap: u32,
    chunks_per_row: u32,
    pieces_per_row: u32,
    npieces: u32,
    _pad: u32,
}

crate::ops::params_layout!(PngParams {
    row_len,
    height,
    bpp,
    swap,
    chunks_per_row,
    pieces_per_row,
    npieces
});

/// Passes a submission times: the PNG passes and those recorded before them (a blur's).
const TIMED_PASSES: u32 = 64;

/// The most bits a byte of filtered data codes to (the longest literal code).
const MAX_BITS_PER_BYTE: u64 = 12;

/// Every shader the PNG encoder builds, for the shader tests.
pub(super) fn shaders() -> Vec<crate::ops::ShaderCase> {
    use crate::ops::ShaderCase;
    vec![
        ShaderCase::params::<PngParams>(shader!("encode_png_filter")),
        ShaderCase::params::<PngParams>(shader!("encode_png_deflate")),
    ]
}

impl PngParams {
    fn new(layout: &Layout) -> PngParams {
        let bpp = u32::from(layout.channels) * if layout.sixteen { 2 } else { 1 };
        let row_len = layout.width * bpp;
        let chunks_per_row = (row_len + 1) / 8;
        PngParams {
            row_len,
            height: layout.height,
            bpp,
            swap: u32::from(layout.sixteen),
            chunks_per_row,
            pieces_per_row: chunks_per_row + 1,
            npieces: (chunks_per_row + 1) * layout.height,
            _pad: 0,
        }
    }
}

/// The filtered bytes a layout codes: a filter byte and the samples, every row.
fn filtered_len(layout: &Layout) -> u64 {
    let bpp = u64::from(layout.channels) * if layout.sixteen { 2 } else { 1 };
    (u64::from(layout.width) * bpp + 1) * u64::from(layout.height)
}

/// The most bits the coded pieces can take, and so the words the packing may touch.
fn max_bits(layout: &Layout) -> u64 {
    u64::from(HEADER_BITS) + MAX_BITS_PER_BYTE * filtered_len(layout)
}

/// Whether an image fits the GPU passes on `gpu`: every bit offset and index within a u32,
/// every buffer within one storage binding. Else the CPU encodes it.
pub(super) fn fits(gpu: &Gpu, layout: &Layout) -> bool {
    let max = gpu.limits.max_storage_buffer_binding_size;
    let bpp = u64::from(layout.channels) * if layout.sixteen { 2 } else { 1 };
    let row_len = u64::from(layout.width) * bpp;
    let npieces = ((row_len + 1) / 8 + 1) * u64::from(layout.height);
    let samples = row_len * u64::from(layout.height);
    layout.width > 0
        && layout.height > 0
        && max_bits(layout) + 64 < u64::from(u32::MAX)
        && npieces < u64::from(u32::MAX)
        && npieces * 8 <= max
        && samples <= max
        && (max_bits(layout) / 32 + 2) * 4 <= max
}

/// Where the encoder reads the samples (rows packed, 16-bit ones little-endian).
pub(super) enum Source<'a> {
    /// On the host: uploaded.
    Host(&'a [u8]),
    /// Already on the device (another op's result), read where it is.
    Device(&'a wgpu::Buffer),
    /// Made on the device by passes recorded into the image's submission (another op's
    /// result), read where it is.
    Recorded(&'a mut dyn FnMut(&mut Batch) -> Result<wgpu::Buffer>),
}

/// The PNG data of images of one layout on the device: its buffers and passes, kept from one
/// image to the next (`super::with_plan`).
pub(super) struct PngPlan {
    layout: Layout,
    params: PngParams,
    t: Tunables,
    filter: Kernel,
    lens: Kernel,
    pack: Kernel,
    /// Made by `set_source` for each image.
    filter_bind: Option<wgpu::BindGroup>,
    lens_bind: wgpu::BindGroup,
    pack_bind: wgpu::BindGroup,
    offsets: ScanPlan,
    params_buf: wgpu::Buffer,
    filtered: wgpu::Buffer,
    words: wgpu::Buffer,
    /// Word 0 the total bit count, then three words a filter workgroup (its Adler sums).
    meta: wgpu::Buffer,
    /// Where the host reads, in the same submission as the passes: `meta` at 0, the pass
    /// times at `times_at`, and from `words_at` the first `words`, as many bytes as the
    /// stored stream's (a longer coded stream is not used).
    back: wgpu::Buffer,
    times_at: u64,
    words_at: u64,
    /// Bytes of `meta` and of the words copied back.
    meta_len: u64,
    back_len: u64,
    /// The submission's pass timer, kept from one image to the next.
    timer: Option<PassTimer>,
    /// The samples of a host image, uploaded; made on first use.
    host_src: Option<wgpu::Buffer>,
    /// The code table, held for the bind groups.
    _table: wgpu::Buffer,
}

impl PngPlan {
    /// Builds the passes and buffers for images of `layout`.
    pub(super) fn new(gpu: &Gpu, layout: &Layout, t: Tunables) -> Result<PngPlan> {
        t.check(&gpu.limits)?;
        let params = PngParams::new(layout);
        let n = params.npieces as usize;
        let filter = gpu.kernel(
            &shader!("encode_png_filter"),
            "main",
            &[("WG_SIZE", f64::from(t.filter_wg))],
        )?;
        let deflate_shader = shader!("encode_png_deflate");
        let consts = [
            ("WG_SIZE", f64::from(t.deflate_wg)),
            ("HEADER_BITS", f64::from(HEADER_BITS)),
        ];
        let lens = gpu.kernel(&deflate_shader, "lens", &consts)?;
        let pack = gpu.kernel(&deflate_shader, "pack", &consts)?;
        let params_buf = gpu.upload("png params", Usage::Uniform, &[params]);
        let filtered = gpu.buffer("png filtered", Usage::Storage, n as u64 * 8);
        let table = gpu.upload("png codes", Usage::Storage, &deflate::table_words());
        let filter_groups = params.npieces.div_ceil(t.filter_wg);
        let meta_len = 4 + 12 * u64::from(filter_groups);
        let meta = gpu.buffer("png sums", Usage::Storage, meta_len);
        let words_len = (max_bits(layout) / 32 + 2) * 4;
        let words = gpu.buffer("png words", Usage::Storage, words_len);
        let scan_opts = scan::Options::default().resolved(gpu, n + 1);
        let offsets = ScanPlan::new::<u32>(gpu, n + 1, &scan_opts)?;
        let Some(offsets_buf) = offsets.single_buffer() else {
            bail!("{n} pieces are more than one scan segment holds");
        };
        // `lens` does not use the bit count's slot, the last binding.
        let deflate = [&params_buf, &filtered, &table, offsets_buf, &words, &meta];
        let lens_bind = gpu.bind(&lens, &deflate[..5]);
        let pack_bind = gpu.bind(&pack, &deflate);
        let stored = deflate::stored_size(filtered_len(layout) as usize) as u64;
        let back_len = stored.next_multiple_of(4).min(words_len);
        let times_at = meta_len.next_multiple_of(8);
        let words_at = times_at + 16 * u64::from(TIMED_PASSES);
        // MAP_READ to be read in place, COPY_DST for the submission to copy into.
        let back = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("png read-back"),
            size: words_at + back_len,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Ok(PngPlan {
            layout: *layout,
            params,
            t,
            filter,
            lens,
            pack,
            filter_bind: None,
            lens_bind,
            pack_bind,
            offsets,
            params_buf,
            filtered,
            words,
            back,
            times_at,
            words_at,
            meta_len,
            back_len,
            timer: None,
            meta,
            host_src: None,
            _table: table,
        })
    }

    /// Whether this plan codes images of `layout` with `t`.
    pub(super) fn takes(&self, layout: &Layout, t: &Tunables) -> bool {
        self.layout == *layout && self.t == *t
    }

    /// Device memory the plan holds, roughly (what the plans kept are bounded by).
    pub(super) fn bytes(&self) -> u64 {
        [&self.filtered, &self.words, &self.meta]
            .iter()
            .map(|b| b.size())
            .sum::<u64>()
            + u64::from(self.params.npieces) * 4
            + self.back.size()
            + self.host_src.as_ref().map_or(0, wgpu::Buffer::size)
    }

    /// The image `samples` holds coded on the device: its passes (after those `Recorded`
    /// records, in the same submission), the copies back, one wait and one mapping. The zlib
    /// stream, or `None` where the png crate would store the data instead (the coded stream
    /// is larger); and the submission's pass times.
    pub(super) fn run(
        &mut self,
        gpu: &Gpu,
        samples: Source,
    ) -> Result<(Option<Vec<u8>>, Vec<PassTime>)> {
        // A timer left with passes of a submission that failed before it ran is dropped.
        let mut timer = self
            .timer
            .take()
            .unwrap_or_else(|| PassTimer::new(gpu, TIMED_PASSES));
        let mut batch = gpu.batch(Some(&mut timer));
        match samples {
            Source::Recorded(record) => {
                let made = record(&mut batch)?;
                self.set_source(gpu, Source::Device(&made));
            }
            other => self.set_source(gpu, other),
        }
        self.record(&mut batch);
        self.record_read_back(&mut batch);
        let (zlib, times) = batch.submit_read(&self.back, self.times_at, |view| self.zlib(view))?;
        self.timer = Some(timer);
        Ok((zlib, times))
    }

    /// The image to code next: uploaded into the plan's own buffer, or read where it is.
    pub(super) fn set_source(&mut self, gpu: &Gpu, samples: Source) {
        let src = match samples {
            Source::Recorded(_) => unreachable!("`run` records it first"),
            Source::Host(bytes) => {
                let src = self.host_src.get_or_insert_with(|| {
                    gpu.buffer(
                        "png samples",
                        Usage::Storage,
                        bytes.len().next_multiple_of(4) as u64,
                    )
                });
                gpu.write_padded(src, bytes);
                src.clone()
            }
            Source::Device(buffer) => buffer.clone(),
        };
        self.filter_bind = Some(gpu.bind(
            &self.filter,
            &[&self.params_buf, &src, &self.filtered, &self.meta],
        ));
    }

    /// Every pass: filter, bit lengths, their scan, packing.
    pub(super) fn record(&self, batch: &mut Batch) {
        let n = self.params.npieces;
        let filter_bind = self.filter_bind.as_ref().expect("set_source ran");
        batch.dispatch(
            "png_filter",
            &self.filter,
            filter_bind,
            n.div_ceil(self.t.filter_wg),
        );
        batch.dispatch(
            "png_lens",
            &self.lens,
            &self.lens_bind,
            (n + 1).div_ceil(self.t.deflate_wg),
        );
        self.offsets.record(batch);
        batch.clear_buffer(&self.words);
        batch.dispatch(
            "png_pack",
            &self.pack,
            &self.pack_bind,
            (n + 1).div_ceil(self.t.deflate_wg),
        );
    }

    /// The copies to the read-back buffer, after `record` in the same submission.
    fn record_read_back(&self, batch: &mut Batch) {
        batch.copy_at(&self.meta, 0, &self.back, 0, self.meta_len);
        batch.copy_at(&self.words, 0, &self.back, self.words_at, self.back_len);
    }

    /// The zlib stream in the mapped read-back `view` of a submission of `record` and
    /// `record_read_back`, or `None` where the png crate would store the data instead.
    fn zlib(&self, view: &[u8]) -> Option<Vec<u8>> {
        let meta: &[u32] = bytemuck::cast_slice(&view[..self.meta_len as usize]);
        let bits = u64::from(HEADER_BITS) + u64::from(meta[0]);
        let adler = combine_adler(&meta[1..]);
        let raw = filtered_len(&self.layout);
        // The end-of-block code, then the 4-byte check.
        let coded = (bits + deflate::eob_len()).div_ceil(8) + 4;
        if coded > deflate::stored_size(raw as usize) as u64 {
            return None;
        }
        let mut out = Vec::with_capacity(coded as usize);
        let len = bits.div_ceil(8) as usize;
        let at = self.words_at as usize;
        out.extend_from_slice(&view[at..at + len]);
        for (o, h) in out.iter_mut().zip(HEADER) {
            *o |= h;
        }
        deflate::finish(&mut out, bits, adler);
        Some(out)
    }
}

/// The Adler-32 of the filtered bytes from the filter workgroups' (A, B, bytes), in order.
fn combine_adler(sums: &[u32]) -> u32 {
    const M: u64 = 65521;
    let (mut a, mut b, mut n) = (0u64, 0u64, 0u64);
    for s in sums.chunks_exact(3) {
        let (a2, b2, n2) = (u64::from(s[0]), u64::from(s[1]), u64::from(s[2]));
        b = (b + n2 * a + b2) % M;
        a = (a + a2) % M;
        n += n2;
    }
    let a = (1 + a) % M;
    let b = (b + n) % M;
    (b << 16 | a) as u32
}

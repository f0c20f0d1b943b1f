//! The GPU passes of a PNG's image data: the rows filtered with each workgroup's Adler-32
//! sums, each piece's bit length, their scan into offsets, the packing; one submission, then
//! two reads (the bit count with the sums, then the coded bytes).

use anyhow::{bail, Result};

use crate::gpu::{Batch, Gpu, Kernel, Usage};
use crate::ops::scan::{self, ScanPlan};
use crate::shader;
use crate::tune::Tunable;

use super::deflate::{self, HEADER, HEADER_BITS};
use super::{Layout, Tunables};

/// Keep in sync with `Params` in wgsl/shared/encode_png.wgsl.
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
}

/// One image's PNG data on the device: its buffers and passes.
pub(super) struct PngPlan {
    params: PngParams,
    t: Tunables,
    filter: Kernel,
    lens: Kernel,
    pack: Kernel,
    filter_bind: wgpu::BindGroup,
    lens_bind: wgpu::BindGroup,
    pack_bind: wgpu::BindGroup,
    offsets: ScanPlan,
    words: wgpu::Buffer,
    /// Word 0 the total bit count, then three words a filter workgroup (its Adler sums).
    meta: wgpu::Buffer,
    /// The samples, params, filtered bytes and code table, held for the bind groups.
    _held: Vec<wgpu::Buffer>,
}

impl PngPlan {
    /// Uploads the samples (or binds them where they are) and builds the passes.
    pub(super) fn new(gpu: &Gpu, layout: &Layout, samples: Source, t: Tunables) -> Result<PngPlan> {
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
        let src = match samples {
            Source::Host(bytes) => {
                let src = gpu.buffer(
                    "png samples",
                    Usage::Storage,
                    bytes.len().next_multiple_of(4) as u64,
                );
                gpu.write_padded(&src, bytes);
                src
            }
            Source::Device(buffer) => buffer.clone(),
        };
        let params_buf = gpu.upload("png params", Usage::Uniform, &[params]);
        let filtered = gpu.buffer("png filtered", Usage::Storage, n as u64 * 8);
        let table = gpu.upload("png codes", Usage::Storage, &deflate::table_words());
        let filter_groups = params.npieces.div_ceil(t.filter_wg);
        let meta = gpu.buffer(
            "png sums",
            Usage::Storage,
            4 + 12 * u64::from(filter_groups),
        );
        let words = gpu.buffer("png words", Usage::Storage, (max_bits(layout) / 32 + 2) * 4);
        let scan_opts = scan::Options::default().resolved(gpu, n + 1);
        let offsets = ScanPlan::new::<u32>(gpu, n + 1, &scan_opts)?;
        let Some(offsets_buf) = offsets.single_buffer() else {
            bail!("{n} pieces are more than one scan segment holds");
        };
        let filter_bind = gpu.bind(&filter, &[&params_buf, &src, &filtered, &meta]);
        // `lens` does not use the bit count's slot, the last binding.
        let deflate = [&params_buf, &filtered, &table, offsets_buf, &words, &meta];
        let lens_bind = gpu.bind(&lens, &deflate[..5]);
        let pack_bind = gpu.bind(&pack, &deflate);
        Ok(PngPlan {
            params,
            t,
            filter,
            lens,
            pack,
            filter_bind,
            lens_bind,
            pack_bind,
            offsets,
            words,
            meta,
            _held: vec![src, params_buf, filtered, table],
        })
    }

    /// Every pass: filter, bit lengths, their scan, packing.
    pub(super) fn record(&self, batch: &mut Batch) {
        let n = self.params.npieces;
        batch.dispatch(
            "png_filter",
            &self.filter,
            &self.filter_bind,
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

    /// The zlib stream of the last `record`, or `None` where the png crate would store the
    /// data instead (the coded stream is larger).
    pub(super) fn read(&self, gpu: &Gpu) -> Result<Option<Vec<u8>>> {
        let groups = self.params.npieces.div_ceil(self.t.filter_wg) as usize;
        let meta: Vec<u32> = gpu.read_vec(&self.meta, 1 + 3 * groups)?;
        let bits = u64::from(HEADER_BITS) + u64::from(meta[0]);
        let adler = combine_adler(&meta[1..]);
        let raw = u64::from(self.params.row_len + 1) * u64::from(self.params.height);
        // The end-of-block code, then the 4-byte check.
        let coded = (bits + deflate::eob_len()).div_ceil(8) + 4;
        if coded > deflate::stored_size(raw as usize) as u64 {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(coded as usize);
        gpu.read_with(&self.words, 0, bits.div_ceil(8), |b| {
            out.extend_from_slice(b)
        })?;
        for (o, h) in out.iter_mut().zip(HEADER) {
            *o |= h;
        }
        deflate::finish(&mut out, bits, adler);
        Ok(Some(out))
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

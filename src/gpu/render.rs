//! Drawing: a full-screen fragment shader rendered into an RGBA8 texture and read back, for
//! ops that make pictures (the histogram plot).

use anyhow::{bail, Result};

use super::{Gpu, Shader};

impl Gpu {
    /// Draws a full-screen quad (4 vertices as a triangle strip, positions made by the shader's
    /// `vs_main` from the vertex index) shaded by its `fs_main` into a `width` x `height`
    /// RGBA8 texture, with `buffers[i]` at binding i of group 0, and returns the pixels: rows
    /// top to bottom, 4 bytes a pixel, no padding.
    // One recipe read top to bottom (target texture, draw, copy, read back), about 100
    // lines of wgpu descriptors: split further it would read worse.
    pub fn render_fullscreen(
        &self,
        shader: &Shader,
        buffers: &[&wgpu::Buffer],
        width: u32,
        height: u32,
    ) -> Result<Vec<u8>> {
        let max = self.limits.max_texture_dimension_2d;
        if width == 0 || height == 0 || width > max || height > max {
            bail!("cannot draw {width}x{height} pixels: this adapter draws 1 to {max} a side");
        }
        let format = wgpu::TextureFormat::Rgba8Unorm;
        let label = shader.name.trim_end_matches(".wgsl");
        let pipeline = self.fullscreen_pipeline(shader, format)?;
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        let size = wgpu::Extent3d {
            width,
            height,
            depth_or_array_layers: 1,
        };
        // RENDER_ATTACHMENT to draw into it, COPY_SRC to read it back.
        let texture = self.device.create_texture(&wgpu::TextureDescriptor {
            label: Some(label),
            size,
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format,
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
            view_formats: &[],
        });
        let view = texture.create_view(&Default::default());
        // Texture-to-buffer copies need rows padded to 256 bytes.
        let row = width as u64 * 4;
        let padded_row = row.next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT as u64);
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("render read-back"),
            size: padded_row * height as u64,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
        {
            let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some(label),
                color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                    view: &view,
                    depth_slice: None,
                    resolve_target: None,
                    ops: wgpu::Operations {
                        load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                        store: wgpu::StoreOp::Store,
                    },
                })],
                depth_stencil_attachment: None,
                timestamp_writes: None,
                occlusion_query_set: None,
                multiview_mask: None,
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.draw(0..4, 0..1);
        }
        encoder.copy_texture_to_buffer(
            wgpu::TexelCopyTextureInfo {
                texture: &texture,
                mip_level: 0,
                origin: wgpu::Origin3d::ZERO,
                aspect: wgpu::TextureAspect::All,
            },
            wgpu::TexelCopyBufferInfo {
                buffer: &staging,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(padded_row as u32),
                    rows_per_image: Some(height),
                },
            },
            size,
        );
        self.queue.submit([encoder.finish()]);
        // Rows arrive padded to 256 bytes: keep each row's pixels.
        self.read_mapped(&staging, |mapped| {
            let mut pixels = Vec::with_capacity((row * height as u64) as usize);
            for r in mapped.chunks_exact(padded_row as usize) {
                pixels.extend_from_slice(&r[..row as usize]);
            }
            pixels
        })
    }

    /// The pipeline of `shader`'s `vs_main` (a full-screen triangle strip) and `fs_main`,
    /// drawing into `format`.
    fn fullscreen_pipeline(
        &self,
        shader: &Shader,
        format: wgpu::TextureFormat,
    ) -> Result<wgpu::RenderPipeline> {
        let label = shader.name.trim_end_matches(".wgsl");
        let composed = super::compose(shader, &super::Variant::default())?;
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(shader.name),
                source: wgpu::ShaderSource::Wgsl(composed.source.into()),
            });
        let pipeline = self
            .device
            .create_render_pipeline(&wgpu::RenderPipelineDescriptor {
                label: Some(label),
                layout: None,
                vertex: wgpu::VertexState {
                    module: &module,
                    entry_point: Some("vs_main"),
                    compilation_options: Default::default(),
                    buffers: &[],
                },
                primitive: wgpu::PrimitiveState {
                    topology: wgpu::PrimitiveTopology::TriangleStrip,
                    ..Default::default()
                },
                depth_stencil: None,
                multisample: Default::default(),
                fragment: Some(wgpu::FragmentState {
                    module: &module,
                    entry_point: Some("fs_main"),
                    compilation_options: Default::default(),
                    targets: &[Some(wgpu::ColorTargetState {
                        format,
                        blend: None,
                        write_mask: wgpu::ColorWrites::ALL,
                    })],
                }),
                multiview_mask: None,
                cache: None,
            });
        if let Some(e) = pollster::block_on(scope.pop()) {
            bail!("building {label} failed: {e}");
        }
        Ok(pipeline)
    }
}

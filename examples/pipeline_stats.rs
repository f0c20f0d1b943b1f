//! What the Vulkan driver made of each kernel: registers, spills, instructions, as the driver
//! reports them through `VK_KHR_pipeline_executable_properties` (NVIDIA's and Mesa's drivers
//! have it). The GPU machine has no profiler; this is the one view of the compiled code there.
//!
//!     cargo run --release --example pipeline_stats -- [FILTER] [--set NAME=VALUE]...
//!
//! Every shader variant of every op (the cases the shader test checks, with the override
//! constants each plan sets) whose label contains FILTER is turned into SPIR-V by naga with
//! the options wgpu uses for gpukit's pipelines (indices clamped, buffer accesses left to the
//! driver's robustness where it has `robustBufferAccess2`, no loop counters as
//! `Gpu::kernel_unrolled` builds them, no zeroing of workgroup memory; matmul's and some of
//! resize's kernels without runtime checks, as their plans build them), then built by the
//! first discrete adapter of Vulkan 1.3 or later (else the first one; `GPUKIT_STATS_ADAPTER`
//! picks by a piece of its name). One line per pipeline: its label, entry point and every
//! statistic. The few kernels gpukit builds with `Gpu::kernel` keep wgpu's loop counters,
//! which this tool leaves out.
//!
//! `--set` overrides one constant in every variant that declares it, and nothing derives the
//! others from it: set a tiling's derived constants too (matmul's WG_SIZE, KCHUNK, WARP_TILE,
//! SA4 and SB4, as `Tunables` makes them), or the statistics are of a kernel gpukit does not
//! build. NVIDIA's driver gives statistics only, no internal representations (no disassembly).
//! The adapter's cooperative matrix configurations (`VK_KHR_cooperative_matrix`) go to stderr
//! first.

use std::collections::BTreeMap;
use std::ffi::CStr;

use anyhow::{anyhow, bail, Context, Result};
use ash::vk;
use gpukit::gpu::compose;
use gpukit::ops::REGISTRY;
use wgpu::naga;

struct Args {
    filter: String,
    set: Vec<(String, f64)>,
}

fn args() -> Result<Args> {
    let mut a = Args {
        filter: String::new(),
        set: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-h" | "--help" => {
                println!("usage: pipeline_stats [FILTER] [--set NAME=VALUE]...");
                println!("prints the driver's statistics of every shader variant whose label contains FILTER");
                std::process::exit(0);
            }
            "--set" => {
                let kv = it.next().context("--set needs NAME=VALUE")?;
                let (k, v) = kv.split_once('=').context("--set needs NAME=VALUE")?;
                a.set
                    .push((k.to_string(), v.parse().context("--set: not a number")?));
            }
            _ if arg.starts_with('-') => bail!("unknown flag {arg}"),
            _ => a.filter = arg,
        }
    }
    Ok(a)
}

/// The device, and whether it has `VK_EXT_robustness2` (wgpu then leaves buffer bounds to it).
struct Vulkan {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    /// `None` where the driver lacks the extension (lavapipe of Mesa 22): the pipelines are
    /// still built, which checks the SPIR-V and the layouts, but nothing is reported.
    exec: Option<ash::khr::pipeline_executable_properties::Device>,
    robust2: bool,
}

fn has_ext(exts: &[vk::ExtensionProperties], name: &CStr) -> bool {
    exts.iter()
        .any(|e| e.extension_name_as_c_str().is_ok_and(|n| n == name))
}

fn open() -> Result<Vulkan> {
    // SAFETY: loading the system's Vulkan loader; every call below follows the spec's valid
    // usage (handles from this instance, structures filled by ash's builders).
    unsafe {
        let entry = ash::Entry::load().context("no Vulkan loader")?;
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
        let instance = entry.create_instance(
            &vk::InstanceCreateInfo::default().application_info(&app),
            None,
        )?;
        let wanted = std::env::var("GPUKIT_STATS_ADAPTER").unwrap_or_default();
        let mut devices: Vec<_> = instance
            .enumerate_physical_devices()?
            .into_iter()
            .map(|pd| (pd, instance.get_physical_device_properties(pd)))
            .filter(|(_, p)| {
                let name = p
                    .device_name_as_c_str()
                    .unwrap_or_default()
                    .to_string_lossy();
                name.contains(&wanted)
            })
            .collect();
        devices.sort_by_key(|(_, p)| p.device_type != vk::PhysicalDeviceType::DISCRETE_GPU);
        let (pd, props) = *devices.first().context("no Vulkan adapter matches")?;
        let name = props.device_name_as_c_str()?.to_string_lossy().into_owned();
        let exts = instance.enumerate_device_extension_properties(pd)?;
        let exec_name = ash::khr::pipeline_executable_properties::NAME;
        let has_exec = has_ext(&exts, exec_name);
        if !has_exec {
            eprintln!("{name} does not have {exec_name:?}: building the pipelines only");
        }
        if props.api_version < vk::API_VERSION_1_3 {
            bail!("{name} has Vulkan below 1.3, which this tool does not handle");
        }
        // wgpu leaves buffer bounds to the driver where robustBufferAccess2 is there.
        let robust2 = has_ext(&exts, ash::ext::robustness2::NAME) && {
            let mut r2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default();
            let mut query = vk::PhysicalDeviceFeatures2::default().push_next(&mut r2);
            instance.get_physical_device_features2(pd, &mut query);
            r2.robust_buffer_access2 == vk::TRUE
        };
        // What tensor-core-like operations the driver offers (wgpu 30's cooperative matrices
        // take only 8 x 8 x 8 f32 ones): one line a configuration.
        if has_ext(&exts, ash::khr::cooperative_matrix::NAME) {
            let coop = ash::khr::cooperative_matrix::Instance::new(&entry, &instance);
            for c in coop.get_physical_device_cooperative_matrix_properties(pd)? {
                eprintln!(
                    "cooperative matrix: {}x{}x{} A {:?} B {:?} C {:?} result {:?} {:?}",
                    c.m_size,
                    c.n_size,
                    c.k_size,
                    c.a_type,
                    c.b_type,
                    c.c_type,
                    c.result_type,
                    c.scope
                );
            }
        }
        let queue = instance
            .get_physical_device_queue_family_properties(pd)
            .iter()
            .position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .context("no compute queue")? as u32;
        // Every feature the adapter has, as wgpu turns on those gpukit's kernels use
        // (subgroups, f16, 16-bit storage, robust buffer access).
        let mut f11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut f13 = vk::PhysicalDeviceVulkan13Features::default();
        let mut r2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default();
        let mut features = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut f11)
            .push_next(&mut f12)
            .push_next(&mut f13);
        if robust2 {
            features = features.push_next(&mut r2);
        }
        instance.get_physical_device_features2(pd, &mut features);
        let mut pe = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default()
            .pipeline_executable_info(true);
        let mut ext_names = Vec::new();
        if has_exec {
            ext_names.push(exec_name.as_ptr());
        }
        if robust2 {
            ext_names.push(ash::ext::robustness2::NAME.as_ptr());
        }
        let priority = [1.0];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(queue)
            .queue_priorities(&priority)];
        let info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&ext_names)
            .push_next(&mut features);
        let info = if has_exec {
            info.push_next(&mut pe)
        } else {
            info
        };
        let device = instance.create_device(pd, &info, None)?;
        let exec = has_exec
            .then(|| ash::khr::pipeline_executable_properties::Device::new(&instance, &device));
        eprintln!(
            "adapter: {name} (Vulkan {}.{}, driver {:#x})",
            vk::api_version_major(props.api_version),
            vk::api_version_minor(props.api_version),
            props.driver_version
        );
        Ok(Vulkan {
            _entry: entry,
            instance,
            device,
            exec,
            robust2,
        })
    }
}

/// SPIR-V for `entry` of `module` with `constants` set, as wgpu's Vulkan backend writes it.
fn spirv(
    vk: &Vulkan,
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    entry: &str,
    constants: &naga::back::PipelineConstants,
    checked: bool,
) -> Result<(naga::Module, Vec<u32>)> {
    use naga::back::spv;
    use naga::proc::BoundsCheckPolicy::{Restrict, Unchecked};
    let stage = naga::ShaderStage::Compute;
    let (module, info) = naga::back::pipeline_constants::process_overrides(
        module,
        info,
        Some((stage, entry)),
        constants,
    )
    .map_err(|e| anyhow!("{e}"))?;
    let options = spv::Options {
        lang_version: (1, 6),
        flags: spv::WriterFlags::empty(),
        bounds_check_policies: naga::proc::BoundsCheckPolicies {
            index: if checked { Restrict } else { Unchecked },
            buffer: if checked && !vk.robust2 {
                Restrict
            } else {
                Unchecked
            },
            image_load: Unchecked,
            binding_array: Unchecked,
        },
        zero_initialize_workgroup_memory: spv::ZeroInitializeWorkgroupMemoryMode::None,
        force_loop_bounding: false,
        emit_int_div_checks: checked,
        ..spv::Options::default()
    };
    let pipeline = spv::PipelineOptions {
        shader_stage: stage,
        entry_point: entry.to_string(),
    };
    let words = spv::write_vec(&module, &info, &options, Some(&pipeline))?;
    Ok((module.into_owned(), words))
}

/// The descriptor set layouts of `module`'s buffers, by group.
fn layouts(vk: &Vulkan, module: &naga::Module) -> Result<Vec<vk::DescriptorSetLayout>> {
    let mut groups: BTreeMap<u32, Vec<vk::DescriptorSetLayoutBinding>> = BTreeMap::new();
    for (_, var) in module.global_variables.iter() {
        let Some(b) = &var.binding else { continue };
        let ty = match var.space {
            naga::AddressSpace::Uniform => vk::DescriptorType::UNIFORM_BUFFER,
            naga::AddressSpace::Storage { .. } => vk::DescriptorType::STORAGE_BUFFER,
            other => bail!("binding {} of {other:?} is not a buffer", b.binding),
        };
        groups.entry(b.group).or_default().push(
            vk::DescriptorSetLayoutBinding::default()
                .binding(b.binding)
                .descriptor_type(ty)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE),
        );
    }
    let top = groups.keys().next_back().map_or(0, |g| g + 1);
    (0..top)
        .map(|g| {
            let bindings = groups.remove(&g).unwrap_or_default();
            let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
            // SAFETY: a valid device and create info.
            Ok(unsafe { vk.device.create_descriptor_set_layout(&info, None)? })
        })
        .collect()
}

fn value(s: &vk::PipelineExecutableStatisticKHR) -> String {
    // SAFETY: the union's member is the one `format` names.
    unsafe {
        match s.format {
            vk::PipelineExecutableStatisticFormatKHR::BOOL32 => (s.value.b32 != 0).to_string(),
            vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
            vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
            vk::PipelineExecutableStatisticFormatKHR::FLOAT64 => format!("{:.3}", s.value.f64),
            _ => "?".to_string(),
        }
    }
}

/// Builds the pipeline and prints its statistics.
fn report(
    vk: &Vulkan,
    label: &str,
    entry: &str,
    module: &naga::Module,
    words: &[u32],
) -> Result<()> {
    let sets = layouts(vk, module)?;
    // SAFETY: valid handles of this device; the SPIR-V is naga's, validated above. The objects
    // made here are destroyed before a normal return (an error leaks them: the tool then
    // exits).
    unsafe {
        let shader = vk
            .device
            .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(words), None)?;
        let layout = vk.device.create_pipeline_layout(
            &vk::PipelineLayoutCreateInfo::default().set_layouts(&sets),
            None,
        )?;
        let name = std::ffi::CString::new(entry)?;
        let capture = if vk.exec.is_some() {
            vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR
        } else {
            vk::PipelineCreateFlags::empty()
        };
        let info = vk::ComputePipelineCreateInfo::default()
            .flags(capture)
            .stage(
                vk::PipelineShaderStageCreateInfo::default()
                    .stage(vk::ShaderStageFlags::COMPUTE)
                    .module(shader)
                    .name(&name),
            )
            .layout(layout);
        let pipeline = vk
            .device
            .create_compute_pipelines(vk::PipelineCache::null(), &[info], None)
            .map_err(|(_, e)| anyhow!("building the pipeline: {e}"))?[0];
        let pinfo = vk::PipelineInfoKHR::default().pipeline(pipeline);
        let executables = match &vk.exec {
            Some(exec) => exec.get_pipeline_executable_properties(&pinfo)?,
            None => {
                println!("{label} {entry}: built");
                Vec::new()
            }
        };
        for (i, _) in executables.iter().enumerate() {
            let exec = vk.exec.as_ref().expect("executables come from it");
            let einfo = vk::PipelineExecutableInfoKHR::default()
                .pipeline(pipeline)
                .executable_index(i as u32);
            let stats = exec.get_pipeline_executable_statistics(&einfo)?;
            let line: Vec<String> = stats
                .iter()
                .map(|s| {
                    let n = s.name_as_c_str().unwrap_or_default().to_string_lossy();
                    format!("{n}={}", value(s))
                })
                .collect();
            println!("{label} {entry}: {}", line.join(", "));
        }
        vk.device.destroy_pipeline(pipeline, None);
        vk.device.destroy_pipeline_layout(layout, None);
        vk.device.destroy_shader_module(shader, None);
        for s in sets {
            vk.device.destroy_descriptor_set_layout(s, None);
        }
    }
    Ok(())
}

fn main() -> Result<()> {
    let args = args()?;
    let vk = open()?;
    let mut built = 0;
    for op in REGISTRY {
        for case in (op.shaders)() {
            let c = compose(&case.shader, &case.variant)?;
            if !c.label.contains(&args.filter) {
                continue;
            }
            let module = naga::front::wgsl::parse_str(&c.source)
                .map_err(|e| anyhow!("{}: {}", c.label, e.emit_to_string(&c.source)))?;
            let info = naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::all(),
            )
            .validate(&module)
            .map_err(|e| anyhow!("{}: {:?}", c.label, e.into_inner()))?;
            let mut constants = naga::back::PipelineConstants::default();
            for (k, v) in &case.overrides {
                constants.insert(k.to_string(), *v);
            }
            let declared = |name: &str| {
                module
                    .overrides
                    .iter()
                    .any(|(_, o)| o.name.as_deref() == Some(name))
            };
            for (k, v) in &args.set {
                if declared(k) {
                    constants.insert(k.clone(), *v);
                }
            }
            // The kernels the plans build without runtime checks (`Gpu::kernel_unchecked`):
            // matmul's, resize's 8-bit row pass, and its column pass where it runs `rows8`.
            let rows8 = case.overrides.iter().any(|&(k, v)| k == "RV" && v > 0.0);
            let checked = !(op.name == "matmul"
                || c.label.starts_with("resize_h8")
                || (c.label.starts_with("resize_v") && rows8));
            for ep in module
                .entry_points
                .iter()
                .filter(|e| e.stage == naga::ShaderStage::Compute)
            {
                let (m, words) = spirv(&vk, &module, &info, &ep.name, &constants, checked)
                    .with_context(|| format!("{} {}", c.label, ep.name))?;
                report(&vk, &c.label, &ep.name, &m, &words)
                    .with_context(|| format!("{} {}", c.label, ep.name))?;
                built += 1;
            }
        }
    }
    if built == 0 {
        bail!("no shader variant's label contains {:?}", args.filter);
    }
    // SAFETY: nothing of the device or instance is in use any more.
    unsafe {
        vk.device.destroy_device(None);
        vk.instance.destroy_instance(None);
    }
    Ok(())
}

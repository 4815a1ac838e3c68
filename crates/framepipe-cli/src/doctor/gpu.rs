//! The GPU: which renderer a show's GPU elements (ISF shaders, transitions) would run on, and
//! what moving frames to and from it and one shader pass cost there, measured
//! (`framepipe_gpu::probe`, on a thread of its own that opens and closes the context).

use framepipe_gpu::probe::{probe, GpuProbe};

use super::*;

/// Frame sizes the transfers are timed at.
const SIZES: [(u32, u32); 2] = [(1280, 720), (1920, 1080)];

/// The GPU section: "GPU: <renderer> (<api version>[, software renderer]) — upload 1080p X ms,
/// download Y ms, one pass Z ms", or "GPU: none — <why, naming the packages>".
pub(super) fn gpu(sizes: &Sizes) -> Section {
    progress(&format!(
        "GPU: opening a headless context, timing uploads and downloads at 720p and 1080p and \
         one shader pass at 1080p ({} runs each)",
        sizes.gpu_runs
    ));
    let runs = sizes.gpu_runs;
    let found = std::thread::spawn(move || probe(&SIZES, runs))
        .join()
        .unwrap_or_else(|_| {
            Err(framepipe_gpu::GpuError::Mismatch(
                "the GPU probe panicked".into(),
            ))
        });
    match found {
        Ok(p) => measured(&p),
        Err(e) => {
            let line = format!("GPU: none — {e}");
            Section {
                key: "gpu",
                title: "GPU (isf shaders, transitions)",
                figures: json!({ "available": false, "error": e.to_string(), "line": line }),
                lines: vec![line],
                status: Status::Warn,
                summary: "no GL context: GPU elements (isf, transitions) cannot run here".into(),
                advice: format!(
                    "sudo apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri (Mesa, llvmpipe \
                     included), or your GPU's EGL driver; FRAMEPIPE_EGL_LIB names another \
                     libEGL ({})",
                    framepipe_gpu::PACKAGES
                ),
            }
        }
    }
}

fn measured(p: &GpuProbe) -> Section {
    let info = &p.info;
    let at = |w: u32| p.transfers.iter().find(|t| t.width == w);
    let fhd = at(1920);
    let line = format!(
        "GPU: {info} — upload 1080p {} ms, download {} ms, one pass {:.2} ms",
        fhd.map_or("?".into(), |t| format!("{:.2}", t.upload_ms)),
        fhd.map_or("?".into(), |t| format!("{:.2}", t.download_ms)),
        p.pass_1080p_ms
    );
    let mut lines = vec![
        line.clone(),
        format!(
            "EGL platform {}; {}; GLSL {}",
            info.platform.name(),
            info.version,
            info.glsl
        ),
    ];
    for t in &p.transfers {
        lines.push(format!(
            "{}x{}: upload {:.2} ms, download {:.2} ms (of which start() held the GPU thread \
             {:.2} ms)",
            t.width, t.height, t.upload_ms, t.download_ms, t.download_start_ms
        ));
    }
    let transfers: Vec<Value> = p
        .transfers
        .iter()
        .map(|t| {
            json!({
                "width": t.width,
                "height": t.height,
                "upload_ms": round3(t.upload_ms),
                "download_ms": round3(t.download_ms),
                "download_start_ms": round3(t.download_start_ms),
            })
        })
        .collect();
    // One upload, one download and a pass per frame at 60 fps: what is left of the period.
    let edge_ms = fhd.map_or(0.0, |t| t.upload_ms + t.download_ms) + p.pass_1080p_ms;
    let (status, summary, advice) = if info.software {
        (
            Status::Warn,
            format!(
                "a software renderer ({}): shaders run on the CPU's cores; an upload, a pass \
                 and a download of a 1080p frame take {edge_ms:.1} ms, so keep GPU chains \
                 small or the frames small",
                info.renderer
            ),
            "a machine with a GPU and its EGL driver (Mesa's for AMD and Intel, NVIDIA's) runs \
             the same shaders many times faster"
                .into(),
        )
    } else {
        (
            Status::Ok,
            format!(
                "{}: an upload, a pass and a download of a 1080p frame take {edge_ms:.1} ms",
                info.renderer
            ),
            String::new(),
        )
    };
    Section {
        key: "gpu",
        title: "GPU (isf shaders, transitions)",
        figures: json!({
            "available": true,
            "line": line,
            "renderer": info.renderer,
            "vendor": info.vendor,
            "version": info.version,
            "glsl": info.glsl,
            "api": info.api.name(),
            "api_version": format!("{}.{}", info.major, info.minor),
            "platform": info.platform.name(),
            "software": info.software,
            "transfers": transfers,
            "pass_1080p_ms": round3(p.pass_1080p_ms),
        }),
        lines,
        status,
        summary,
        advice,
    }
}
